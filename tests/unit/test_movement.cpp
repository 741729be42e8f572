#include <gtest/gtest.h>

#include <limits>
#include <numeric>
#include <string>

#include "smelt/ops.h"
#include "test_util.h"

using namespace smelt;
using smelt_test::error_of;
using smelt_test::iota;
using smelt_test::OmpThreads;
using smelt_test::vals;

namespace {
Tensor i64(std::vector<int64_t> v, Shape s) { return from_vector<int64_t>(v, s); }
Tensor mask(std::vector<bool> v, Shape s) { return from_vector<bool>(v, s); }

const DType kAll[] = {kBool, uint8, int8, int16, int32, int64, float16, bfloat16, float32, float64};
}  // namespace

TEST(Movement, IndexSelect) {
  Tensor x = iota({2, 3, 4});
  Tensor idx = i64({2, 0, 2, 1}, {4});
  Tensor r = index_select(x, 1, idx);
  EXPECT_EQ(r.sizes(), (Shape{2, 4, 4}));
  for (int64_t a = 0; a < 2; ++a)
    for (int64_t k = 0; k < 4; ++k)
      for (int64_t c = 0; c < 4; ++c)
        EXPECT_EQ(vals(r)[(a * 4 + k) * 4 + c], a * 12 + vals(idx)[k] * 4 + c);
  // last dim, non-contiguous input, int32 index, every dtype.
  for (DType dt : kAll) {
    Tensor xt = iota({4, 3}, dt).t();  // [3, 4], strided
    Tensor s = index_select(xt, -1, from_vector<int32_t>({3, 0}, {2}));
    std::vector<double> ref;
    for (int i = 0; i < 3; ++i)
      for (int j : {3, 0}) ref.push_back(vals(xt)[i * 4 + j]);
    EXPECT_EQ(vals(s), ref) << dtype_name(dt);
    EXPECT_EQ(s.dtype(), dt);
  }
  EXPECT_EQ(index_select(x, 0, i64({}, {0})).sizes(), (Shape{0, 3, 4}));
  std::string msg = error_of([&] { index_select(x, 1, i64({0, 3}, {2})); });
  EXPECT_NE(msg.find("index_select"), std::string::npos);
  EXPECT_NE(msg.find("out of bounds"), std::string::npos);
  EXPECT_THROW(index_select(x, 1, i64({-1}, {1})), Error);
  EXPECT_THROW(index_select(x, 1, iota({2})), Error);            // float index
  EXPECT_THROW(index_select(x, 1, i64({0, 1}, {1, 2})), Error);  // not a vector
  EXPECT_THROW(index_select(x, 3, i64({0}, {1})), Error);
}

TEST(Movement, Gather) {
  Tensor x = iota({2, 3});
  Tensor idx = i64({0, 0, 2, 1, 0, 1}, {2, 3});
  EXPECT_EQ(vals(gather(x, 1, idx)), (std::vector<double>{0, 0, 2, 4, 3, 4}));
  Tensor idx0 = i64({1, 0, 1}, {1, 3});
  EXPECT_EQ(vals(gather(x, 0, idx0)), (std::vector<double>{3, 1, 5}));
  // index smaller than x in a non-gathered dim; transposed input; every dtype.
  for (DType dt : kAll) {
    Tensor xt = iota({3, 2}, dt).t();  // [[0,2,4],[1,3,5]]
    Tensor g = gather(xt, 1, i64({2, 2, 0, 1}, {2, 2}));
    std::vector<double> xv = vals(xt);
    std::vector<double> ref = {xv[2], xv[2], xv[3], xv[4]};
    EXPECT_EQ(vals(g), ref) << dtype_name(dt);
  }
  Tensor x3 = iota({2, 3, 4});
  Tensor i3 = i64(std::vector<int64_t>(30, 3), {2, 3, 5});
  Tensor g3 = gather(x3, 2, i3);
  EXPECT_EQ(g3.sizes(), (Shape{2, 3, 5}));
  EXPECT_EQ(vals(g3)[29], 23.0);
  std::vector<int64_t> bad(30, 0);
  bad[7] = 6;
  std::string msg = error_of([&] { gather(x3, 2, i64(bad, {2, 3, 5})); });
  EXPECT_NE(msg.find("index 6 is out of bounds for dimension 2 with size 4"), std::string::npos);
  EXPECT_THROW(gather(x3, 2, i64({0}, {1})), Error);                                // ndim mismatch
  EXPECT_THROW(gather(x3, 2, i64(std::vector<int64_t>(40, 0), {2, 4, 5})), Error);  // too big
  EXPECT_THROW(gather(x, 1, i64({-1, 0, 0, 0, 0, 0}, {2, 3})), Error);
  // The first index out of range in element order is named, whichever way
  // the index is laid out (contiguous int64 or int32, or a strided view).
  std::vector<int64_t> two_bad(30, 1);
  two_bad[4] = -2;
  two_bad[20] = 9;
  EXPECT_NE(error_of([&] {
              gather(x3, 2, i64(two_bad, {2, 3, 5}));
            }).find("index -2 is out"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              gather(x3, 2, i64(two_bad, {2, 3, 5}).to(int32));
            }).find("index -2 is out"),
            std::string::npos);
  Tensor strided = i64(two_bad, {2, 5, 3}).transpose(1, 2);  // element (0, 1, 1) first: -2
  ASSERT_FALSE(strided.is_contiguous());
  EXPECT_NE(error_of([&] { gather(x3, 2, strided); }).find("index -2 is out"), std::string::npos);
  Tensor in_range = i64(std::vector<int64_t>(30, 3), {2, 5, 3}).transpose(1, 2);
  EXPECT_EQ(vals(gather(x3, 2, in_range))[0], 3.0);
}

TEST(Movement, Cat) {
  Tensor a = iota({2, 3}), b = iota({4, 3});
  Tensor c = cat({a, b});
  EXPECT_EQ(c.sizes(), (Shape{6, 3}));
  std::vector<double> ref = vals(a);
  for (double v : vals(b)) ref.push_back(v);
  EXPECT_EQ(vals(c), ref);
  Tensor c1 = cat({a, a.t().contiguous().t()}, -1);  // non-contiguous second input
  EXPECT_EQ(vals(c1), (std::vector<double>{0, 1, 2, 0, 1, 2, 3, 4, 5, 3, 4, 5}));
  // Promotion (int32 + float16 -> float16, int32 + float32 -> float32).
  Tensor p = cat({iota({2, 3}, int32), iota({2, 3}, float16)}, 1);
  EXPECT_EQ(p.dtype(), DType::Float16);
  EXPECT_EQ(p.sizes(), (Shape{2, 6}));
  EXPECT_EQ(cat({iota({1}, int32), iota({1}, float32)}).dtype(), DType::Float32);
  EXPECT_EQ(cat({iota({1}, uint8), iota({1}, int8)}).dtype(), DType::Int16);
  // Empty inputs: [0, 3] is a real operand; 1-D [0] is skipped whatever the shapes.
  EXPECT_EQ(cat({zeros({0, 3}), a}).sizes(), (Shape{2, 3}));
  Tensor sk = cat({zeros({0}), a, zeros({0})}, 1);
  EXPECT_EQ(sk.sizes(), (Shape{2, 3}));
  EXPECT_EQ(vals(sk), vals(a));
  EXPECT_EQ(cat({zeros({0}), zeros({0})}).sizes(), (Shape{0}));
  for (DType dt : kAll)
    EXPECT_EQ(vals(cat({iota({2}, dt), iota({1}, dt)})), vals(cat({iota({2}), iota({1})}).to(dt)));
  std::string msg = error_of([&] { cat({a, iota({2, 4})}); });
  EXPECT_NE(msg.find("Sizes of tensors must match except in dimension 0. Expected size 3 but got "
                     "size 4 for tensor number 1 in the list."),
            std::string::npos);
  EXPECT_THROW(cat({}), Error);
  EXPECT_THROW(cat({a, iota({2, 3, 1})}), Error);
  EXPECT_THROW(cat({scalar_tensor(1.0)}), Error);
  EXPECT_THROW(cat({a, b}, 2), Error);
}

TEST(Movement, Stack) {
  Tensor a = iota({2, 3}), b = full({2, 3}, 9.0);
  Tensor s = stack({a, b}, 1);
  EXPECT_EQ(s.sizes(), (Shape{2, 2, 3}));
  EXPECT_EQ(vals(s), (std::vector<double>{0, 1, 2, 9, 9, 9, 3, 4, 5, 9, 9, 9}));
  EXPECT_EQ(stack({a, b}).sizes(), (Shape{2, 2, 3}));
  EXPECT_EQ(stack({a, b}, -1).sizes(), (Shape{2, 3, 2}));
  EXPECT_EQ(vals(stack({a, b}, -1).select(2, 1)), vals(b));
  EXPECT_EQ(stack({scalar_tensor(1), scalar_tensor(2.5)}).dtype(), DType::Float32);
  EXPECT_EQ(stack({zeros({0, 2}), zeros({0, 2})}).sizes(), (Shape{2, 0, 2}));
  EXPECT_NE(error_of([&] { stack({a, iota({3, 2})}); }).find("stack"), std::string::npos);
  EXPECT_THROW(stack({}), Error);
  EXPECT_THROW(stack({a}, 3), Error);
}

TEST(Movement, Pad) {
  Tensor x = iota({2, 3});
  Tensor p = pad(x, {1, 2, 0, 1}, -1.0);
  EXPECT_EQ(p.sizes(), (Shape{3, 6}));
  EXPECT_EQ(vals(p), (std::vector<double>{-1, 0, 1, 2, -1, -1, -1, 3, 4, 5, -1, -1, -1, -1, -1, -1,
                                          -1, -1}));
  EXPECT_EQ(vals(pad(x, {-1, 1})), (std::vector<double>{1, 2, 0, 4, 5, 0}));  // crop left
  EXPECT_EQ(vals(pad(iota({3}, int32), {1, 0}, 2.7)), (std::vector<double>{2, 0, 1, 2}));
  EXPECT_EQ(pad(x.t(), {0, 0, 1, 1}).sizes(), (Shape{5, 2}));
  EXPECT_EQ(vals(pad(x.t(), {0, 0, 1, 1})), (std::vector<double>{0, 0, 0, 3, 1, 4, 2, 5, 0, 0}));
  EXPECT_EQ(pad(zeros({0, 2}), {1, 1}).sizes(), (Shape{0, 4}));
  EXPECT_EQ(vals(pad(zeros({0}), {2, 0}, 5.0)), (std::vector<double>{5, 5}));
  EXPECT_NE(error_of([&] { pad(x, {1}); }).find("pad"), std::string::npos);
  EXPECT_THROW(pad(x, {1, 1, 1, 1, 1, 1}), Error);
  EXPECT_THROW(pad(x, {-2, -2}), Error);
}

/// Fills and pads large enough to be split across threads (contiguous
/// fills go to parallel_for): every element, borders and interior, on 1 and
/// 4 threads, for a zero fill (memset), a value fill and a value that is not
/// all-zero bits (-0.0).
TEST(Movement, LargePadsAndFillsSetEveryElementOnAnyThreadCount) {
  const int64_t R = 300, C = 257;  // 77,100 elements in, 302 x 261 out
  Tensor x = add(iota({R, C}), 1.0);
  for (int threads : {1, 4}) {
    const OmpThreads scope(threads);
    SCOPED_TRACE("threads " + std::to_string(threads));
    for (double value : {0.0, 2.5, -0.0}) {
      const std::vector<double> p = vals(pad(x, {3, 1, 1, 1}, value));
      ASSERT_EQ(p.size(), static_cast<size_t>((R + 2) * (C + 4)));
      for (int64_t i = 0; i < R + 2; ++i)
        for (int64_t j = 0; j < C + 4; ++j) {
          const double got = p[static_cast<size_t>(i * (C + 4) + j)];
          const bool inside = i >= 1 && i <= R && j >= 3 && j < C + 3;
          const double want = inside ? static_cast<double>((i - 1) * C + (j - 3) + 1) : value;
          ASSERT_EQ(got, want) << "at " << i << ", " << j;
          if (!inside) {
            ASSERT_EQ(std::signbit(got), std::signbit(value)) << "at " << i << ", " << j;
          }
        }
    }
    for (DType dt : {DType::Float32, DType::Int64, DType::BFloat16, DType::Bool}) {
      const std::vector<double> f = vals(full({100003}, 1.0, dt));
      ASSERT_EQ(f.size(), 100003u);
      for (size_t k = 0; k < f.size(); ++k) ASSERT_EQ(f[k], 1.0) << dtype_name(dt) << " at " << k;
      // Zeroed over ones (a fresh buffer may be zero already).
      Tensor t = full({100003}, 1.0, dt);
      t.zero_();
      const std::vector<double> z = vals(t);
      for (size_t k = 0; k < z.size(); ++k) ASSERT_EQ(z[k], 0.0) << dtype_name(dt) << " at " << k;
    }
  }
}

TEST(Movement, TrilTriu) {
  Tensor x = ones({4, 5});
  EXPECT_EQ(vals(tril(x, 1)),
            (std::vector<double>{1, 1, 0, 0, 0, 1, 1, 1, 0, 0, 1, 1, 1, 1, 0, 1, 1, 1, 1, 1}));
  EXPECT_EQ(vals(triu(x, -1)),
            (std::vector<double>{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1, 1, 1, 1, 0, 0, 1, 1, 1}));
  Tensor b = iota({2, 2, 2}, int32);
  EXPECT_EQ(vals(tril(b)), (std::vector<double>{0, 0, 2, 3, 4, 0, 6, 7}));
  EXPECT_EQ(vals(triu(b)), (std::vector<double>{0, 1, 0, 3, 4, 5, 0, 7}));
  EXPECT_EQ(tril(b).dtype(), DType::Int32);
  EXPECT_EQ(vals(triu(iota({2, 2}).t())), (std::vector<double>{0, 2, 0, 3}));
  for (DType dt : kAll)
    EXPECT_EQ(vals(tril(ones({2, 2}, dt), -5)), (std::vector<double>{0, 0, 0, 0}));
  EXPECT_EQ(tril(zeros({0, 3})).numel(), 0);
  EXPECT_NE(error_of([] { tril(ones({3})); }).find("tril"), std::string::npos);
  // Against the element rule (keep j - i <= d, or >= d), batched, not square,
  // rows enough to be split across threads, diagonals out to the int64 ends.
  const int64_t B = 3, R = 70, C = 530;
  Tensor big = iota({B, R, C}) + 1.0;
  const int64_t kMax = std::numeric_limits<int64_t>::max(),
                kMin = std::numeric_limits<int64_t>::min();
  for (int64_t d : {int64_t{0}, int64_t{1}, int64_t{-1}, int64_t{7}, int64_t{-7}, C - 1, C, C + 5,
                    -R + 1, -R, -R - 5, kMax, kMin}) {
    for (bool lower : {true, false}) {
      const std::vector<double> got = vals(lower ? tril(big, d) : triu(big, d));
      size_t bad = 0;
      for (int64_t b = 0; b < B; ++b)
        for (int64_t i = 0; i < R; ++i)
          for (int64_t j = 0; j < C; ++j) {
            // j - i <= d without overflow: compare in long double.
            const long double diff = static_cast<long double>(j) - static_cast<long double>(i);
            const bool keep =
                lower ? diff <= static_cast<long double>(d) : diff >= static_cast<long double>(d);
            const size_t at = static_cast<size_t>((b * R + i) * C + j);
            bad += got[at] != (keep ? static_cast<double>(at + 1) : 0.0);
          }
      EXPECT_EQ(bad, 0u) << (lower ? "tril" : "triu") << " diagonal " << d;
    }
  }
}

TEST(Movement, MaskedFill) {
  Tensor x = iota({2, 3});
  Tensor m = mask({true, false, true}, {3});
  EXPECT_EQ(vals(masked_fill(x, m, -1.5)), (std::vector<double>{-1.5, 1, -1.5, -1.5, 4, -1.5}));
  EXPECT_EQ(vals(x.masked_fill(mask({false, true}, {2, 1}), 7)),
            (std::vector<double>{0, 1, 2, 7, 7, 7}));
  // int tensor, float value truncates; transposed input; every dtype.
  EXPECT_EQ(vals(masked_fill(iota({3}, int64), mask({false, true, false}, {3}), 2.9)),
            (std::vector<double>{0, 2, 2}));
  EXPECT_EQ(vals(masked_fill(x.t(), mask({true, false}, {2}), 0)),
            (std::vector<double>{0, 3, 0, 4, 0, 5}));
  for (DType dt : kAll) {
    Tensor r = masked_fill(zeros({2}, dt), mask({false, true}, {2}), 1);
    EXPECT_EQ(r.dtype(), dt);
    EXPECT_EQ(vals(r), (std::vector<double>{0, 1})) << dtype_name(dt);
  }
  // Out of place broadcasts x against a larger mask, as PyTorch.
  EXPECT_EQ(
      masked_fill(iota({3}), mask({true, false, false, true, false, false}, {2, 3}), 5).sizes(),
      (Shape{2, 3}));
  std::string msg = error_of([&] { masked_fill(x, iota({3}, int64), 0); });
  EXPECT_NE(msg.find("masked_fill"), std::string::npos);
  EXPECT_NE(msg.find("bool"), std::string::npos);
  EXPECT_THROW(masked_fill(x, mask({true, false}, {2}), 0), Error);
  EXPECT_EQ(masked_fill(zeros({0, 3}), mask({true, true, true}, {3}), 1).numel(), 0);
}

TEST(Movement, MaskedFillInPlace) {
  Tensor x = iota({2, 3});
  Tensor row = x.select(0, 1);
  row.masked_fill_(mask({true, false, true}, {3}), -1);
  EXPECT_EQ(vals(x), (std::vector<double>{0, 1, 2, -1, 4, -1}));
}

TEST(Movement, IndexPutMask) {
  Tensor x = iota({2, 3});
  Tensor before = x;
  x.index_put_(mask({true, false, true, false, false, true}, {2, 3}), full({1}, -1.0));
  EXPECT_TRUE(x.is_same(before));
  EXPECT_EQ(vals(x), (std::vector<double>{-1, 1, -1, 3, 4, -1}));
  // Row mask over dim 0; values broadcast to [n, 3].
  Tensor y = iota({3, 3});
  y.index_put_(mask({false, true, true}, {3}), from_vector<float>({7, 8, 9}, {3}));
  EXPECT_EQ(vals(y), (std::vector<double>{0, 1, 2, 7, 8, 9, 7, 8, 9}));
  // One value per selected element.
  Tensor z = zeros({4}, int32);
  z.index_put_(mask({true, false, true, true}, {4}), from_vector<int32_t>({1, 2, 3}, {3}));
  EXPECT_EQ(vals(z), (std::vector<double>{1, 0, 2, 3}));
  // Shape mismatch is raised before any write.
  Tensor w = iota({4});
  std::string msg = error_of([&] {
    w.index_put_(mask({true, true, false, false}, {4}), from_vector<float>({1, 2, 3}, {3}));
  });
  EXPECT_NE(msg.find("index_put_"), std::string::npos);
  EXPECT_EQ(vals(w), (std::vector<double>{0, 1, 2, 3}));
  EXPECT_THROW(w.index_put_(mask({true, true}, {2}), full({1}, 1.0)), Error);
}

TEST(Movement, IndexPutIndex) {
  Tensor x = zeros({4, 2});
  x.index_put_(i64({0, -1}, {2}), from_vector<float>({1, 2, 3, 4}, {2, 2}));
  EXPECT_EQ(vals(x), (std::vector<double>{1, 2, 0, 0, 0, 0, 3, 4}));
  x.index_put_(from_vector<int32_t>({2}, {1}), full({1}, 5.0));
  EXPECT_EQ(vals(x.select(0, 2)), (std::vector<double>{5, 5}));
  x.index_put_(i64({1}, {}), full({2}, 6.0));  // 0-dim index
  EXPECT_EQ(vals(x.select(0, 1)), (std::vector<double>{6, 6}));
  // Writes through a view reach the base.
  Tensor base = zeros({2, 4});
  Tensor v = base.t();  // [4, 2], non-contiguous
  v.index_put_(i64({3}, {1}), full({2}, 1.0));
  EXPECT_EQ(vals(base), (std::vector<double>{0, 0, 0, 1, 0, 0, 0, 1}));
  // Out of range raises before writing.
  Tensor y = iota({3});
  std::string msg = error_of([&] { y.index_put_(i64({0, 3}, {2}), full({1}, 9.0)); });
  EXPECT_NE(msg.find("out of bounds"), std::string::npos);
  EXPECT_EQ(vals(y), (std::vector<double>{0, 1, 2}));
  EXPECT_THROW(y.index_put_(iota({1}), full({1}, 1.0)), Error);
}
