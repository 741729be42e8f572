// The backend interface on every device built in (the CPU today): the
// registry, memory, eager kernels called by name, GEMM with epilogue, the
// random-fill contract, and the module cache a toolchain builds through.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "backend/backend.h"
#include "compiler/compile_test_util.h"
#include "compiler/runtime/kernel_cache.h"
#include "core/tensor_impl.h"
#include "smelt/ops.h"
#include "test_util.h"

using namespace smelt;
using smelt_test::expect_error_mentions;
using smelt_test::make_exact;
using smelt_test::ScopedEnv;
using smelt_test::vals;

TEST(Backend, CpuIsRegisteredAndCudaWhenBuilt) {
  backend::Backend& cpu = backend::backend(Device());
  EXPECT_EQ(cpu.type(), DeviceType::CPU);
  EXPECT_STREQ(cpu.name(), "cpu");
  EXPECT_EQ(cpu.device_count(), 1);
  EXPECT_EQ(&cpu, &backend::backend_for(DeviceType::CPU));
  backend::Backend* cuda = backend::find_backend(DeviceType::CUDA);
  if (cuda == nullptr) {
    expect_error_mentions([] { backend::backend_for(DeviceType::CUDA); },
                          "smelt was built without CUDA");
    // Eager ops reach the same answer through the allocator registry.
    expect_error_mentions([] { zeros({2}, TensorOptions().device(Device("cuda:0"))); },
                          "smelt was built without CUDA");
    return;
  }
  EXPECT_EQ(cuda->type(), DeviceType::CUDA);
  EXPECT_STREQ(cuda->name(), "cuda");
  EXPECT_EQ(cuda, &backend::backend_for(DeviceType::CUDA));
  if (cuda->device_count() == 0)
    expect_error_mentions([] { zeros({2}, TensorOptions().device(Device("cuda:0"))); },
                          "no CUDA device");
}

TEST(Backend, MemoryThroughTheBackend) {
  backend::Backend& be = backend::backend(Device());
  backend::Stream s = be.current_stream(Device());
  void* p = be.allocator().allocate(16, Device());
  ASSERT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u);
  be.memset(p, 0, 16, s);
  int32_t host[4] = {1, 1, 1, 1};
  be.copy_to_host(host, p, sizeof host, s);
  EXPECT_EQ(host[0] + host[1] + host[2] + host[3], 0);
  const int32_t src[4] = {5, 6, 7, 8};
  be.copy_on_device(p, src, sizeof src, s);
  be.copy_on_device(static_cast<char*>(p) + 4, p, 8, s);  // overlapping, as memmove
  be.copy_to_host(host, p, sizeof host, s);
  EXPECT_EQ(std::vector<int32_t>(host, host + 4), (std::vector<int32_t>{5, 5, 6, 8}));
  be.synchronize(s);
  be.allocator().deallocate(p, Device());
}

TEST(Backend, PointwiseKernelsByFunctorName) {
  backend::Backend& be = backend::backend(Device());
  EXPECT_TRUE(be.has_pointwise("exp", DType::Float32));
  EXPECT_TRUE(be.has_pointwise("exp", DType::Float16));  // computes in float32
  EXPECT_FALSE(be.has_pointwise("exp", DType::Int64));
  EXPECT_FALSE(be.has_pointwise("sub", DType::Bool));
  EXPECT_FALSE(be.has_pointwise("no_such_functor", DType::Float32));
  // add_alpha with an extra argument, mixed input dtypes, a broadcast operand.
  Tensor a = make_exact<int32_t>({1, 2, 3}, {3});
  Tensor b = make_exact<float>({0.5f}, {1});
  Tensor out = detail::make_empty({3}, DType::Float32, Device());
  be.pointwise("add_alpha", {Scalar(4)}, DType::Float32, out, {a, b});
  EXPECT_EQ(vals(out), (std::vector<double>{3, 4, 5}));
  // The same through the op, which records the same functor.
  EXPECT_EQ(vals(add(a, b, 4)), vals(out));
}

TEST(Backend, ReductionsCopyAndFill) {
  backend::Backend& be = backend::backend(Device());
  Tensor x = make_exact<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor s = detail::make_empty({3}, DType::Float32, Device());
  be.reduce(backend::ReduceOp::Sum, x, {0}, s);
  EXPECT_EQ(vals(s), (std::vector<double>{5, 7, 9}));
  Tensor idx = detail::make_empty({2}, DType::Int64, Device());
  be.arg_reduce(x, {1}, Tensor(), idx, true);
  EXPECT_EQ(vals(idx), (std::vector<double>{2, 2}));
  Tensor t = detail::make_empty({3, 2}, DType::Int64, Device());
  be.copy(t, x.t());  // strided, converting
  EXPECT_EQ(vals(t), (std::vector<double>{1, 4, 2, 5, 3, 6}));
  be.fill(detail::make_view(t, {2}, {3}, 1), Scalar(-2.7));  // strided view, truncating cast
  EXPECT_EQ(vals(t), (std::vector<double>{1, -2, 2, 5, -2, 6}));
}

TEST(Backend, GemmWithEpilogue) {
  backend::Backend& be = backend::backend(Device());
  EXPECT_TRUE(be.gemm_epilogue_supported("gelu_erf"));
  EXPECT_FALSE(be.gemm_epilogue_supported("softmax"));
  const float a[4] = {1, -2, 3, -4}, b[4] = {1, 0, 0, 1}, bias[2] = {0.5f, 0.5f};
  float c[4] = {};
  backend::Gemm g;
  g.m = g.n = g.k = 2;
  g.a = {a, 0, 2, 1};
  g.b = {b, 0, 2, 1};
  g.c = c;
  g.c_row_stride = 2;
  g.epilogue.bias = bias;
  g.epilogue.activation = "relu";
  be.gemm(g, be.current_stream(Device()));
  EXPECT_EQ(std::vector<float>(c, c + 4), (std::vector<float>{1.5f, 0, 3.5f, 0}));
  g.dtype = DType::Bool;
  expect_error_mentions([&] { be.gemm(g, {}); }, "bool");
}

TEST(Backend, RandomFillContract) {
  using K = backend::RandomFill::Kind;
  EXPECT_EQ(backend::random_blocks(K::Uniform, DType::Float32, 9), 3u);  // 4 per block
  EXPECT_EQ(backend::random_blocks(K::Uniform, DType::Float64, 9), 5u);  // 2 per block
  EXPECT_EQ(backend::random_blocks(K::Normal, DType::Float32, 9), 5u);
  EXPECT_EQ(backend::random_blocks(K::Integer, DType::Int64, 0), 0u);
  // A fill is a pure function of (seed, first block): the same twice.
  backend::Backend& be = backend::backend(Device());
  backend::RandomFill r;
  r.kind = K::Normal;
  r.seed = 42;
  r.first_block = 7;
  Tensor x = detail::make_empty({1000}, DType::Float64, Device());
  Tensor y = detail::make_empty({1000}, DType::Float64, Device());
  be.random(x, r);
  be.random(y, r);
  EXPECT_EQ(vals(x), vals(y));
  double mean = 0;
  for (double v : vals(x)) mean += v / 1000;
  EXPECT_LT(std::abs(mean), 0.15);
}

namespace {
/// A module that only remembers where it was loaded from.
class FakeModule final : public backend::Module {
 public:
  explicit FakeModule(std::string path) : path_(std::move(path)) {}
  backend::KernelHandle function(const std::string&) const override { return {this}; }
  const std::string& path() const override { return path_; }

 private:
  std::string path_;
};
}  // namespace

TEST(Backend, ModuleCacheKeysVerifiesAndRebuilds) {
  const std::string dir = smelt_test::fresh_cache_dir("module_cache");
  ScopedEnv env("SMELT_CACHE_DIR", dir);
  int compiles = 0;
  auto compile = [&](const std::string& src, const std::string& bin) {
    ++compiles;
    std::ifstream in(src);
    std::string text((std::istreambuf_iterator<char>(in)), {});
    std::ofstream(bin) << "binary of " << text;
  };
  auto load = [](const std::string& bin, std::string*) -> std::shared_ptr<backend::Module> {
    return std::make_shared<FakeModule>(bin);
  };
  auto& cache = compiler::kernel_cache();
  backend::BuildInfo first, second, other;
  auto m1 = cache.get_or_build("source A", "fp1", ".src", ".bin", compile, load, &first);
  EXPECT_FALSE(first.cache_hit);
  EXPECT_EQ(compiles, 1);
  EXPECT_EQ(first.source_path, dir + "/" + first.key + ".src");
  EXPECT_EQ(m1->path(), dir + "/" + first.key + ".bin");
  cache.get_or_build("source A", "fp1", ".src", ".bin", compile, load, &second);
  EXPECT_TRUE(second.cache_hit);
  EXPECT_EQ(second.key, first.key);
  EXPECT_EQ(compiles, 1) << "a verified entry is loaded, not rebuilt";
  cache.get_or_build("source A", "fp2", ".src", ".bin", compile, load, &other);
  EXPECT_NE(other.key, first.key) << "the toolchain's fingerprint is part of the key";
  EXPECT_EQ(compiles, 2);
  std::ofstream(m1->path()) << "corrupt";  // the .meta no longer matches
  backend::BuildInfo again;
  cache.get_or_build("source A", "fp1", ".src", ".bin", compile, load, &again);
  EXPECT_FALSE(again.cache_hit);
  EXPECT_EQ(compiles, 3);
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}
