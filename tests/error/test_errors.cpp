// Programs that must fail with a clear smelt::Error: one test per class of bad
// input, each checking that the message starts with / names the op.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include "core/tensor_impl.h"
#include "smelt/io.h"
#include "smelt/ops.h"
#include "test_util.h"

using namespace smelt;
using smelt_test::iota;
using smelt_test::make_exact;

namespace {

// Expects `f` to throw smelt::Error (nothing else) whose message mentions `op`.
void expect_error(const std::string& op, const std::function<void()>& f) {
  try {
    f();
    ADD_FAILURE() << op << ": no error was raised";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(op), std::string::npos)
        << "message does not name '" << op << "': " << e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << op << ": threw a non-smelt exception: " << e.what();
  }
}

}  // namespace

TEST(Errors, ShapeMismatch) {
  Tensor a = iota({2, 3}), b = iota({4});
  expect_error("add", [&] { add(a, b); });
  expect_error("matmul", [&] { matmul(iota({2, 3}), iota({4, 5})); });
  expect_error("cat", [&] { cat({iota({2, 3}), iota({2, 4})}, 0); });
}

TEST(Errors, BadDim) {
  Tensor a = iota({2, 3});
  expect_error("sum", [&] { sum(a, {5}); });
  expect_error("softmax", [&] { softmax(a, -3); });
  expect_error("transpose", [&] { transpose(a, 0, 2); });
}

TEST(Errors, DTypeMismatch) {
  Tensor f = iota({2, 2});
  Tensor d = make_exact<double>({1, 2, 3, 4}, {2, 2});
  expect_error("matmul", [&] { matmul(f, d); });
  expect_error("bitwise_and", [&] { bitwise_and(f, f); });
  expect_error("where", [&] { where(f, f, f); });  // condition must be bool
}

// alpha is converted to the result dtype with PyTorch's overflow check.
TEST(Errors, AlphaOutsideTheResultDtype) {
  Tensor i8 = iota({2}).to(DType::Int8), h = iota({2}).to(DType::Float16);
  expect_error("add", [&] { add(i8, i8, 257); });
  expect_error("sub", [&] { sub(i8, i8, -129); });
  expect_error("add", [&] { add(h, h, 1e5); });
  expect_error("add", [&] { add(iota({2}), iota({2}), 1e300); });
  // In range (uint8 lets a negative integer wrap, as c10 does): no error.
  EXPECT_EQ(add(i8, i8, 127).to(DType::Int64).to_vector<int64_t>(),
            (std::vector<int64_t>{0, -128}));
  Tensor u8 = iota({2}).to(DType::UInt8);
  EXPECT_EQ(sub(u8, u8, -1).to(DType::Int64).to_vector<int64_t>(), (std::vector<int64_t>{0, 2}));
}

TEST(Errors, OutOfRangeIndex) {
  Tensor w = iota({10, 4});
  expect_error("embedding", [&] { embedding(w, make_exact<int64_t>({10}, {1})); });
  expect_error("index_select", [&] { index_select(w, 0, make_exact<int64_t>({-11}, {1})); });
  expect_error("select", [&] { select(w, 0, 10); });
}

TEST(Errors, EmptyReduction) {
  Tensor e = detail::make_empty({0}, DType::Float32, Device());
  expect_error("amax", [&] { amax(e); });
  expect_error("max", [&] { smelt::max(e); });
  expect_error("argmax", [&] { argmax(e); });
}

TEST(Errors, IntegerDivisionByZero) {
  Tensor a = make_exact<int64_t>({7, -7}, {2});
  Tensor z = make_exact<int64_t>({0, 0}, {2});
  expect_error("div", [&] { div(a, z, std::string("trunc")); });
  expect_error("floor_divide", [&] { floor_divide(a, z); });
  expect_error("remainder", [&] { remainder(a, z); });
}

TEST(Errors, BadView) {
  Tensor a = iota({2, 3});
  expect_error("view", [&] { view(t(a), {6}); });  // strides forbid a view
  expect_error("view", [&] { view(a, {-1, -1}); });
  expect_error("expand", [&] { expand(a, {3, 4}); });
}

TEST(Errors, ReshapeNumelMismatch) {
  Tensor a = iota({2, 3});
  expect_error("reshape", [&] { reshape(a, {4}); });
  expect_error("view", [&] { view(a, {4, -1}); });
}

TEST(Errors, CorruptSafetensors) {
  auto path =
      (std::filesystem::temp_directory_path() / "smelt_test_errors_corrupt.safetensors").string();
  {
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    std::string header = R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})";
    uint64_t n = header.size();
    for (int i = 0; i < 8; ++i) f.put(static_cast<char>(n >> (8 * i)));
    f << header << "short";
  }
  expect_error("load_safetensors", [&] { load_safetensors(path); });
}

TEST(Errors, InputsUntouchedAfterError) {
  // Validation happens before any write: a failed in-place op leaves its target unchanged.
  Tensor a = iota({2, 3});
  Tensor before = a.clone();
  expect_error("add", [&] { a.add_(iota({4})); });
  EXPECT_EQ(a.to_vector<float>(), before.to_vector<float>());
}

TEST(Errors, UndefinedTensorIsAnErrorNotACrash) {
  Tensor u;
  expect_error("sizes", [&] { (void)u.sizes(); });
  expect_error("dtype", [&] { (void)u.dtype(); });
  expect_error("sizes", [&] { (void)u.dim(); });
  expect_error("sizes", [&] { (void)u.size(0); });
}

TEST(Errors, ShapesBeyondAddressableMemory) {
  expect_error("empty", [&] { zeros({int64_t{1} << 40, int64_t{1} << 40}); });
}

// Out of memory is an OutOfMemoryError naming the op, the shape, the dtype and
// the size, and saying what to do (2^54 bytes: no machine has them).
TEST(Errors, OutOfMemoryNamesTheOpShapeAndDtype) {
  const std::string advice =
      " on cpu; free tensors that are no longer needed, or use a smaller shape (e.g. a smaller "
      "batch) or a smaller dtype (float16, bfloat16)";
  const Shape huge{int64_t{1} << 20, int64_t{1} << 20, int64_t{1} << 12};
  auto oom_of = [](const std::function<void()>& f) -> std::string {
    try {
      f();
    } catch (const OutOfMemoryError& e) {
      return e.what();
    } catch (const std::exception& e) {
      return std::string("not an OutOfMemoryError: ") + e.what();
    }
    return "<no error>";
  };
  EXPECT_EQ(oom_of([&] { zeros(huge); }),
            "zeros: out of memory allocating a float32 tensor of shape [1048576, 1048576, 4096] "
            "(16.0 PiB)" +
                advice);
  EXPECT_EQ(oom_of([&] { randn(huge, DType::Float64); }),
            "randn: out of memory allocating a float64 tensor of shape [1048576, 1048576, 4096] "
            "(32.0 PiB)" +
                advice);
  // An op: its result is the allocation that fails.
  Tensor x = ones({1}, DType::BFloat16).expand(huge);
  EXPECT_EQ(oom_of([&] { exp(x); }),
            "exp: out of memory allocating a bfloat16 tensor of shape [1048576, 1048576, 4096] "
            "(8.0 PiB)" +
                advice);
  EXPECT_EQ(oom_of([&] { (void)(x > 0); }),
            "gt: out of memory allocating a bool tensor of shape [1048576, 1048576, 4096] (4.0 "
            "PiB)" +
                advice);
  // Nothing is left half-done: ordinary allocations keep working.
  EXPECT_EQ(zeros({3}).sum().item<double>(), 0.0);
}
