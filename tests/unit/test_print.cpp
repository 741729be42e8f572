#include <gtest/gtest.h>

#include <cmath>
#include <sstream>

#include "smelt/ops.h"

using namespace smelt;

namespace {
Tensor f32(std::vector<float> v, Shape s) { return from_vector<float>(v, s); }
}  // namespace

// Expected strings are PyTorch's output with "torch." dropped from dtype names.
TEST(Print, Floats) {
  EXPECT_EQ(f32({1, 2, 3, 4}, {2, 2}).str(), "tensor([[1., 2.],\n        [3., 4.]])");
  EXPECT_EQ(f32({1.5f, 2.25f}, {2}).str(), "tensor([1.5000, 2.2500])");
  EXPECT_EQ(f32({1, -2}, {2}).str(), "tensor([ 1., -2.])");
  EXPECT_EQ(f32({1e-5f, 1}, {2}).str(), "tensor([1.0000e-05, 1.0000e+00])");
  EXPECT_EQ(f32({0.1f, 100}, {2}).str(), "tensor([  0.1000, 100.0000])");
  EXPECT_EQ(f32({NAN, 1, INFINITY, -INFINITY}, {4}).str(), "tensor([nan, 1., inf, -inf])");
  EXPECT_EQ(f32({0, 0}, {2}).str(), "tensor([0., 0.])");
  EXPECT_EQ(f32({1, 1e9f}, {2}).str(), "tensor([1.0000e+00, 1.0000e+09])");
  EXPECT_EQ(scalar_tensor(3.5).str(), "tensor(3.5000)");
  EXPECT_EQ(from_vector<double>({0.5}, {1}).str(), "tensor([0.5000], dtype=float64)");
  EXPECT_EQ(from_vector<float>({1.5f}, {1}, float16).str(), "tensor([1.5000], dtype=float16)");
  EXPECT_EQ(zeros({2, 2, 2}).str(),
            "tensor([[[0., 0.],\n         [0., 0.]],\n\n        [[0., 0.],\n         [0., 0.]]])");
}

TEST(Print, IntsAndBools) {
  EXPECT_EQ(arange(3).str(), "tensor([0, 1, 2])");
  EXPECT_EQ(from_vector<int32_t>({1, -20, 3}, {3}).str(), "tensor([  1, -20,   3], dtype=int32)");
  EXPECT_EQ(from_vector<bool>({true, false}, {2}).str(), "tensor([ True, False])");
  EXPECT_EQ(scalar_tensor(7).str(), "tensor(7)");
  EXPECT_EQ(from_vector<uint8_t>({255}, {1}).str(), "tensor([255], dtype=uint8)");
}

TEST(Print, Empty) {
  EXPECT_EQ(zeros({0}).str(), "tensor([])");
  EXPECT_EQ(zeros({0, 3}).str(), "tensor([], size=(0, 3))");
  EXPECT_EQ(zeros({0}, int32).str(), "tensor([], dtype=int32)");
  EXPECT_EQ(zeros({0}, int64).str(), "tensor([], dtype=int64)");
}

TEST(Print, SummarizeAndWrap) {
  EXPECT_EQ(arange(2000).str(), "tensor([   0,    1,    2,  ..., 1997, 1998, 1999])");
  std::string big = arange(1200.0).reshape({40, 30}).str();
  EXPECT_EQ(big.substr(0, 45), "tensor([[0.0000e+00, 1.0000e+00, 2.0000e+00, ");
  EXPECT_NE(big.find("...,\n"), std::string::npos);
  EXPECT_NE(big.find("1.1990e+03]])"), std::string::npos);
  // 1-D rows wrap at 80 columns: elements_per_line = (80 - 7) / (width + 2).
  std::string w = arange(30).str();
  EXPECT_EQ(w,
            "tensor([ 0,  1,  2,  3,  4,  5,  6,  7,  8,  9, 10, 11, 12, 13, 14, 15, 16, 17,\n"
            "        18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29])");
}

TEST(Print, NonContiguousAndStream) {
  Tensor t = f32({1, 2, 3, 4}, {2, 2}).t();
  EXPECT_EQ(t.str(), "tensor([[1., 3.],\n        [2., 4.]])");
  std::ostringstream os;
  os << arange(2);
  EXPECT_EQ(os.str(), "tensor([0, 1])");
}

TEST(Print, NanHasNoSign) {
  // 0/0 is a negative NaN on x86; PyTorch prints "nan" whatever the sign bit.
  EXPECT_EQ((zeros({2}) / zeros({2})).str(), "tensor([nan, nan])");
}
