// The CUDA runtime: devices, copies between devices, pinned memory and
// non_blocking copies, the caching allocator (reuse, statistics, empty_cache,
// out-of-memory, record_stream), streams and events, the same-device rule,
// printing and item() of CUDA tensors, errors found by kernels, modules on a
// GPU, the shared random stream, 64-bit indexing and cuBLAS GEMMs (float32
// matmul precision). Every test that needs a GPU skips itself ("no CUDA
// device") where there is none.
#include <gtest/gtest.h>

#include <cmath>

#include "backend/backend.h"
#include "core/tensor_impl.h"
#include "smelt/cuda.h"
#include "smelt/io.h"
#include "smelt/nn.h"
#include "smelt/ops.h"
#include "test_util.h"

using namespace smelt;
using smelt_test::expect_error_mentions;
using smelt_test::vals;

namespace {

const Device kGpu("cuda:0");

Tensor gpu(const std::vector<double>& v, const Shape& s, DType dt = float32) {
  return from_vector<double>(v, s, TensorOptions(dt).device(kGpu));
}

}  // namespace

TEST(Cuda, DevicesAndAvailability) {
  EXPECT_EQ(Device("cuda").index, 0);
  EXPECT_EQ(Device("cuda:3").index, 3);
  EXPECT_EQ(Device("cuda:1").str(), "cuda:1");
  EXPECT_EQ(cuda::is_available(), cuda::device_count() > 0);
  SMELT_SKIP_WITHOUT_CUDA();
  EXPECT_GE(cuda::device_count(), 1);
  EXPECT_EQ(cuda::current_device(), 0);
  expect_error_mentions([] { cuda::set_device(cuda::device_count()); }, "does not exist");
  expect_error_mentions(
      [] { zeros({2}, TensorOptions().device(Device(DeviceType::CUDA, cuda::device_count()))); },
      "does not exist");
  cuda::synchronize();
}

TEST(Cuda, WithoutADeviceEveryUseSaysSo) {
  if (cuda::is_available()) GTEST_SKIP() << "a CUDA device is present";
  EXPECT_EQ(cuda::device_count(), 0);
  // Built with CUDA: "no CUDA device"; built without: "built without CUDA".
  const std::string msg = smelt_test::error_of([] { ones({2}).cuda(); });
  EXPECT_TRUE(msg.find("no CUDA device") != std::string::npos ||
              msg.find("built without CUDA") != std::string::npos)
      << msg;
}

TEST(Cuda, CopiesBetweenDevicesInEveryDtype) {
  SMELT_SKIP_WITHOUT_CUDA();
  const std::vector<double> v = {0, 1, -2, 3.5, 100, -7.25};
  for (DType dt : {kBool, uint8, int8, int16, int32, int64, float16, bfloat16, float32, float64}) {
    Tensor c = from_vector<double>(v, {2, 3}, TensorOptions(dt));
    Tensor g = c.to(kGpu);
    EXPECT_TRUE(g.is_cuda());
    EXPECT_EQ(g.dtype(), dt);
    EXPECT_EQ(vals(g.cpu()), vals(c)) << dtype_name(dt);
    EXPECT_EQ(vals(g), vals(c)) << dtype_name(dt);  // to_vector reads through the host
    // A non-contiguous view moves as its values.
    EXPECT_EQ(vals(c.t().cuda()), vals(c.t())) << dtype_name(dt);
    EXPECT_EQ(vals(g.t().contiguous()), vals(c.t())) << dtype_name(dt);
  }
  EXPECT_EQ(zeros({0, 3}).cuda().numel(), 0);
  // copy_ between devices, both ways, and into a strided view.
  Tensor dst = zeros({3, 2}, TensorOptions().device(kGpu));
  dst.t().copy_(from_vector<double>({1, 2, 3, 4, 5, 6}, {2, 3}));
  EXPECT_EQ(vals(dst), (std::vector<double>{1, 4, 2, 5, 3, 6}));
  Tensor host = zeros({3, 2});
  host.copy_(dst);
  EXPECT_EQ(vals(host), vals(dst));
}

TEST(Cuda, PinnedMemoryWithoutAGpuSaysSo) {
  Tensor c = ones({3});
  EXPECT_FALSE(c.is_pinned());
  EXPECT_FALSE(Tensor().is_pinned());
  // A CPU tensor moved to the CPU, blocking or not, is itself.
  EXPECT_EQ(c.to(Device(), true).data_ptr(), c.data_ptr());
  if (cuda::is_available()) GTEST_SKIP() << "a CUDA device is present";
  const std::string msg = smelt_test::error_of([&] { (void)c.pin_memory(); });
  EXPECT_NE(msg.find("pin_memory"), std::string::npos) << msg;
  EXPECT_TRUE(msg.find("no CUDA device") != std::string::npos ||
              msg.find("built without CUDA") != std::string::npos)
      << msg;
}

TEST(Cuda, Float32MatmulPrecisionIsASetting) {
  EXPECT_EQ(get_float32_matmul_precision(), "highest");
  for (const char* p : {"high", "medium", "highest"}) {
    set_float32_matmul_precision(p);
    EXPECT_EQ(get_float32_matmul_precision(), p);
  }
  expect_error_mentions([] { set_float32_matmul_precision("tf32"); }, "unknown precision");
  EXPECT_EQ(get_float32_matmul_precision(), "highest");
}

TEST(Cuda, PinnedMemoryAndNonBlockingCopies) {
  SMELT_SKIP_WITHOUT_CUDA();
  Tensor c = arange(0, 1000, 1, TensorOptions(float32)).view({10, 100});
  Tensor p = c.pin_memory();
  EXPECT_TRUE(p.is_pinned());
  EXPECT_TRUE(p.is_cpu());
  EXPECT_FALSE(c.is_pinned());
  EXPECT_EQ(p.pin_memory().data_ptr(), p.data_ptr());  // pinned already: itself
  EXPECT_EQ(vals(p), vals(c));
  EXPECT_EQ(vals(c.t().pin_memory()), vals(c.t()));  // a view pins its values, contiguous
  expect_error_mentions([&] { (void)c.cuda().pin_memory(); }, "only CPU tensors can be pinned");
  // Host to device from pinned memory: queued, then ordered before later work on the stream.
  Tensor g = p.to(kGpu, /*non_blocking=*/true);
  EXPECT_TRUE(g.is_cuda());
  EXPECT_EQ(vals(g * 2), vals(c * 2));
  // The pinned tensor may be dropped right after: its block waits for the copy.
  for (int i = 0; i < 20; ++i) {
    Tensor big = full({1 << 20}, static_cast<double>(i % 8)).pin_memory();
    Tensor on_gpu = big.to(kGpu, true);
    big = Tensor();
    Tensor reuse = full({1 << 20}, -1.0).pin_memory();  // may not take the block in flight
    EXPECT_EQ(on_gpu.sum().item<double>(), static_cast<double>(i % 8) * (1 << 20)) << i;
  }
  // Device to host non_blocking: a pinned result, valid after a synchronization.
  Tensor back = (g + 1).to(Device(), true);
  EXPECT_TRUE(back.is_pinned());
  cuda::current_stream().synchronize();
  EXPECT_EQ(vals(back), vals(c + 1));
  cuda::Event done;
  Tensor back2 = (g * 3).to(Device(), true);
  done.record();
  done.synchronize();
  EXPECT_EQ(vals(back2), vals(c * 3));
  // Blocking copies from pinned memory wait: the source may be overwritten at once.
  Tensor q = full({4096}, 1.0).pin_memory();
  Tensor gq = q.to(kGpu);
  q.fill_(2.0);
  EXPECT_EQ(gq.sum().item<double>(), 4096.0);
}

TEST(Cuda, RecordStreamKeepsABlockUntilTheOtherStreamIsDone) {
  SMELT_SKIP_WITHOUT_CUDA();
  expect_error_mentions([] { ones({2}).record_stream(cuda::current_stream()); },
                        "expected a CUDA tensor");
  cuda::Stream side = cuda::Stream::create();
  const int64_t n = 1 << 24;  // 64 MiB of float32
  const TensorOptions on_gpu = TensorOptions().device(kGpu);
  Tensor w = full({n}, 1.0, on_gpu);
  for (int round = 0; round < 3; ++round) {
    Tensor x = full({n}, 1.0, on_gpu);
    cuda::synchronize();
    Tensor y;
    {
      cuda::StreamGuard guard(side);
      Tensor t = w;
      for (int i = 0; i < 20; ++i) t = t * 1.0;  // a few milliseconds of work first
      y = x + t * 0.0;                           // then x is read
      x.record_stream(side);
      w.record_stream(side);
    }
    x = Tensor();
    // The default stream would take x's block at once (same size, same stream)
    // and overwrite it before the side stream reads it, were the block not held.
    Tensor z = full({n}, 5.0, on_gpu);
    side.synchronize();
    EXPECT_EQ(y.sum().item<double>(), static_cast<double>(n)) << round;
  }
  cuda::synchronize();
  cuda::empty_cache();
}

TEST(Cuda, SafetensorsSaveFromAndLoadStraightToTheGpu) {
  SMELT_SKIP_WITHOUT_CUDA();
  const std::string path = testing::TempDir() + "smelt_cuda_io.safetensors";
  save_safetensors(path, {{"a", gpu({1, 2, 3, 4}, {2, 2}).t()}, {"b", gpu({5}, {1}, int64)}});
  auto loaded = load_safetensors(path, kGpu);
  ASSERT_EQ(loaded.size(), 2u);
  EXPECT_TRUE(loaded.at("a").is_cuda());
  EXPECT_EQ(vals(loaded.at("a")), (std::vector<double>{1, 3, 2, 4}));
  EXPECT_EQ(loaded.at("b").dtype(), int64);
  EXPECT_EQ(vals(loaded.at("b")), (std::vector<double>{5}));
}

TEST(Cuda, PrintingAndItemSynchronize) {
  SMELT_SKIP_WITHOUT_CUDA();
  Tensor x = gpu({1.5, -2}, {2});
  EXPECT_EQ(x.str(), "tensor([ 1.5000, -2.0000], device='cuda:0')");
  EXPECT_EQ(gpu({1, 2}, {2}, int32).str(), "tensor([1, 2], device='cuda:0', dtype=int32)");
  Tensor y = (x * 3 + 1).sum();
  EXPECT_DOUBLE_EQ(y.item<double>(), 4.5 - 6 + 2);
}

TEST(Cuda, CachingAllocatorReusesAndReports) {
  SMELT_SKIP_WITHOUT_CUDA();
  cuda::synchronize();
  cuda::empty_cache();
  const cuda::MemoryStats s0 = cuda::memory_stats();
  {
    Tensor a = empty({1 << 20}, TensorOptions().device(kGpu));  // 4 MiB
    const cuda::MemoryStats s1 = cuda::memory_stats();
    EXPECT_EQ(s1.allocated - s0.allocated, 4 << 20);
    EXPECT_GE(s1.reserved, s1.allocated);
    EXPECT_EQ(s1.num_device_allocs, s0.num_device_allocs + 1);
  }
  const cuda::MemoryStats s2 = cuda::memory_stats();
  EXPECT_EQ(s2.allocated, s0.allocated);
  EXPECT_GT(s2.reserved, s0.reserved);  // cached, not returned to the driver
  EXPECT_GE(s2.peak_allocated, s0.allocated + (4 << 20));
  {
    // The same size class again, and a smaller one split from the cached block:
    // no new cudaMalloc.
    Tensor a = empty({1 << 20}, TensorOptions().device(kGpu));
    Tensor b = empty({100}, TensorOptions().device(kGpu));
    EXPECT_EQ(cuda::memory_stats().num_device_allocs, s2.num_device_allocs + 1);  // b: small pool
    Tensor c = empty({1 << 20}, TensorOptions().device(kGpu));
    (void)a;
    (void)b;
    (void)c;
  }
  cuda::empty_cache();
  const cuda::MemoryStats s3 = cuda::memory_stats();
  EXPECT_EQ(s3.reserved, s0.reserved);
  EXPECT_GT(s3.num_device_frees, s0.num_device_frees);
  cuda::reset_peak_memory_stats();
  EXPECT_EQ(cuda::memory_stats().peak_allocated, cuda::memory_stats().allocated);
}

TEST(Cuda, OutOfMemoryRaisesAndTheProcessStaysUsable) {
  SMELT_SKIP_WITHOUT_CUDA();
  const int64_t ooms = cuda::memory_stats().num_ooms;
  try {
    Tensor huge = empty({int64_t{1} << 48}, TensorOptions(uint8).device(kGpu));  // 256 TiB
    ADD_FAILURE() << "allocated 256 TiB";
  } catch (const OutOfMemoryError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("out of memory"), std::string::npos) << msg;
    EXPECT_NE(msg.find("256.0 TiB"), std::string::npos) << msg;
    EXPECT_NE(msg.find("reserved"), std::string::npos) << msg;
    EXPECT_NE(msg.find("free"), std::string::npos) << msg;
  }
  EXPECT_EQ(cuda::memory_stats().num_ooms, ooms + 1);
  EXPECT_GE(cuda::memory_stats().num_alloc_retries, 1);
  EXPECT_EQ(vals(gpu({1, 2}, {2}) + 1), (std::vector<double>{2, 3}));
}

TEST(Cuda, StreamsAndEvents) {
  SMELT_SKIP_WITHOUT_CUDA();
  cuda::Stream s = cuda::Stream::create();
  EXPECT_NE(s.handle(), nullptr);
  EXPECT_EQ(cuda::current_stream().handle(), nullptr);  // the default stream
  Tensor x = gpu({1, 2, 3}, {3});
  cuda::synchronize();
  Tensor y;
  cuda::Event start, stop;
  {
    cuda::StreamGuard guard(s);
    EXPECT_EQ(cuda::current_stream().handle(), s.handle());
    start.record();
    y = (x * 2).exp();
    stop.record();
  }
  EXPECT_EQ(cuda::current_stream().handle(), nullptr);
  stop.synchronize();
  EXPECT_TRUE(stop.query());
  EXPECT_GE(start.elapsed_time(stop), 0.0f);
  s.synchronize();
  smelt_test::expect_close(vals(y), {std::exp(2.0), std::exp(4.0), std::exp(6.0)}, 1e-6);
}

// Index checks do not wait for the device: an index out of range in gather,
// index_select, embedding or scatter_add raises at the next synchronization,
// naming the op, and the device stays usable.
TEST(Cuda, IndexOutOfRangeRaisesAtTheNextSynchronization) {
  SMELT_SKIP_WITHOUT_CUDA();
  Tensor x = gpu({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor bad = from_vector<int64_t>({0, 3}, {1, 2}).cuda();
  {
    Tensor pending = gather(x, 1, bad);
    expect_error_mentions([&] { cuda::synchronize(); },
                          "gather: an index is out of bounds for dimension 1 with size 3");
  }
  expect_error_mentions([&] { index_select(x, 1, from_vector<int64_t>({5}, {1}).cuda()).cpu(); },
                        "index_select");
  expect_error_mentions([&] { embedding(x, from_vector<int64_t>({2}, {1}).cuda()).cpu(); },
                        "out of bounds for dimension 0 with size 2");
  expect_error_mentions([&] { scatter_add(x, 1, bad, x.narrow(1, 0, 2)).cpu(); }, "scatter_add");
  // cross_entropy reads no target on the host: one outside [0, C) (not
  // ignore_index) raises through its gather at the next synchronization.
  Tensor logits = gpu({1, 2, 3, 4, 5, 6}, {2, 3});
  expect_error_mentions(
      [&] {
        cross_entropy(logits, from_vector<int64_t>({1, 3}, {2}).cuda()).cpu();
      },
      "out of bounds for dimension 1 with size 3");
  expect_error_mentions(
      [&] {
        nll_loss(logits, from_vector<int64_t>({-5, 0}, {2}).cuda()).cpu();
      },
      "out of bounds for dimension 1 with size 3");
  EXPECT_NEAR(cross_entropy(logits, from_vector<int64_t>({-100, 2}, {2}).cuda()).item().to_double(),
              std::log(std::exp(4.0) + std::exp(5.0) + std::exp(6.0)) - 6.0, 1e-5);
  EXPECT_EQ(vals(gather(x, 1, from_vector<int64_t>({2, 0}, {1, 2}).cuda())),
            (std::vector<double>{3, 1}));
  EXPECT_EQ(vals(scatter_add(x, 1, from_vector<int64_t>({2, 2}, {1, 2}).cuda(), x)),
            (std::vector<double>{1, 2, 6, 4, 5, 6}));
}

TEST(Cuda, SameDeviceRuleWithTheCpuScalarException) {
  SMELT_SKIP_WITHOUT_CUDA();
  Tensor g = gpu({1, 2, 3}, {3});
  Tensor c = from_vector<double>({1, 1, 1}, {3}, TensorOptions(float32));
  expect_error_mentions([&] { add(g, c); }, "Expected all tensors to be on the same device");
  expect_error_mentions([&] { matmul(g.view({1, 3}), c.view({3, 1})); }, "different devices");
  expect_error_mentions([&] { index_select(g, 0, from_vector<int64_t>({0}, {1})); },
                        "Expected all tensors to be on the same device");
  // A 0-dim CPU tensor goes with CUDA tensors (PyTorch's exception), either side.
  Tensor s = scalar_tensor(10.0);
  Tensor r = add(g, s);
  EXPECT_TRUE(r.is_cuda());
  EXPECT_EQ(vals(r), (std::vector<double>{11, 12, 13}));
  EXPECT_EQ(vals(sub(s, g)), (std::vector<double>{9, 8, 7}));
  EXPECT_EQ(vals(where(g > 1, s, g)), (std::vector<double>{1, 10, 10}));
}

TEST(Cuda, IntegerDivisionByZeroRaisesAtTheNextSynchronization) {
  SMELT_SKIP_WITHOUT_CUDA();
  Tensor a = gpu({1, 2}, {2}, int64);
  Tensor z = gpu({1, 0}, {2}, int64);
  // The kernel flags the zero; the op returns without waiting for the device.
  Tensor r = remainder(a, z);
  expect_error_mentions([&] { vals(r); }, "remainder: ZeroDivisionError");
  // Raised once: the flag is clear again, and a good division reads back.
  EXPECT_EQ(vals(remainder(a, gpu({1, 1}, {2}, int64))), (std::vector<double>{0, 0}));
  // Every synchronization point raises it, naming the op.
  (void)div(a, z, "floor");
  expect_error_mentions([] { cuda::synchronize(); }, "div: ZeroDivisionError");
  (void)fmod(a.to(int32), z.to(int32));
  expect_error_mentions([] { cuda::current_stream().synchronize(); }, "fmod: ZeroDivisionError");
  (void)div(a.to(int16), z.to(int16), "trunc");
  expect_error_mentions([&] { a.sum().item<int64_t>(); }, "ZeroDivisionError");
  (void)remainder(a.view({2, 1}).expand({2, 3}), z.view({2, 1}));  // the strided kernel checks too
  expect_error_mentions([&] { (void)a.cpu(); }, "remainder: ZeroDivisionError");
  cuda::Event e;
  (void)remainder(a, z);
  e.record();
  expect_error_mentions([&] { e.synchronize(); }, "ZeroDivisionError");
  // A CPU scalar divisor is checked by the op itself, at once.
  expect_error_mentions([&] { remainder(a, scalar_tensor(0, TensorOptions(int64))); },
                        "ZeroDivisionError");
  EXPECT_EQ(vals(div(a, z)), (std::vector<double>{1, INFINITY}));  // true division: inf
  cuda::synchronize();                                             // nothing pending
}

TEST(Cuda, RandomNumbersEqualTheCpusForTheSameSeed) {
  SMELT_SKIP_WITHOUT_CUDA();
  for (DType dt : {float32, float16, bfloat16, float64}) {
    manual_seed(1234);
    const std::vector<double> c = vals(rand({1001}, TensorOptions(dt)));
    manual_seed(1234);
    EXPECT_EQ(vals(rand({1001}, TensorOptions(dt).device(kGpu))), c) << dtype_name(dt);
  }
  manual_seed(7);
  const std::vector<double> nc = vals(randn({999}));
  manual_seed(7);
  smelt_test::expect_close(vals(randn({999}, TensorOptions().device(kGpu))), nc, 1e-6);
  manual_seed(7);
  const std::vector<double> ic = vals(randint(-5, 17, {777}));
  manual_seed(7);
  EXPECT_EQ(vals(randint(-5, 17, {777}, TensorOptions().device(kGpu))), ic);
  manual_seed(9);
  const std::vector<double> dc = vals(dropout(ones({500}), 0.3));
  manual_seed(9);
  EXPECT_EQ(vals(dropout(ones({500}, TensorOptions().device(kGpu)), 0.3)), dc);
}

TEST(Cuda, ModulesMoveAndMatchTheCpu) {
  SMELT_SKIP_WITHOUT_CUDA();
  manual_seed(3);
  nn::Sequential net(nn::Linear(16, 32), nn::GELU(), nn::LayerNorm(Shape{32}), nn::Linear(32, 4));
  Tensor x = randn({8, 16});
  const std::vector<double> want = vals(net->forward(x));
  net->to(kGpu);
  for (auto& p : net->parameters()) EXPECT_TRUE(p.is_cuda());
  Tensor y = net->forward(x.cuda());
  EXPECT_TRUE(y.is_cuda());
  smelt_test::expect_close(vals(y), want, 1e-5);
  // A state dict from the CPU loads into the GPU module (copied across devices).
  nn::StateDict sd;
  for (auto& [k, v] : net->state_dict()) sd.emplace(k, v.cpu());
  net->load_state_dict(sd);
  smelt_test::expect_close(vals(net->forward(x.cuda())), want, 1e-5);
}

TEST(Cuda, MatmulThroughCublas) {
  SMELT_SKIP_WITHOUT_CUDA();
  manual_seed(11);
  Tensor a = randn({3, 33, 65}), b = randn({65, 17});
  const std::vector<double> want = vals(matmul(a.to(float64), b.to(float64)));
  smelt_test::expect_close(vals(matmul(a.cuda(), b.cuda())), want, 1e-5);
  // Transposed and broadcast operands, float64, integers (exact), half types.
  smelt_test::expect_close(vals(matmul(b.t().cuda(), a.transpose(1, 2).cuda())),
                           vals(matmul(b.t().to(float64), a.transpose(1, 2).to(float64))), 1e-5);
  smelt_test::expect_close(vals(matmul(a.to(float64).cuda(), b.to(float64).cuda())), want, 1e-12);
  Tensor ia = randint(-9, 9, {4, 5, 6}), ib = randint(-9, 9, {6, 3});
  EXPECT_EQ(vals(matmul(ia.cuda(), ib.cuda())), vals(matmul(ia, ib)));
  for (DType dt : {float16, bfloat16})
    smelt_test::expect_close(vals(matmul(a.to(dt).cuda(), b.to(dt).cuda())),
                             vals(matmul(a.to(dt), b.to(dt))), 3e-2);
  // TF32 only when allowed.
  set_float32_matmul_precision("high");
  smelt_test::expect_close(vals(matmul(a.cuda(), b.cuda())), want, 1e-2);
  set_float32_matmul_precision("highest");
  EXPECT_EQ(get_float32_matmul_precision(), "highest");
  expect_error_mentions([] { set_float32_matmul_precision("fast"); }, "unknown precision");
  // linear with bias.
  Tensor w = randn({7, 65}), bias = randn({7});
  smelt_test::expect_close(vals(linear(a.cuda(), w.cuda(), bias.cuda())), vals(linear(a, w, bias)),
                           1e-5);
}

TEST(Cuda, GemmEpilogueThroughTheBackend) {
  SMELT_SKIP_WITHOUT_CUDA();
  manual_seed(5);
  for (DType dt : {float32, float16, int32}) {
    Tensor a =
        is_floating(dt) ? randn({2, 5, 7}).to(dt) : randint(-4, 4, {2, 5, 7}, TensorOptions(dt));
    Tensor b = is_floating(dt) ? randn({7, 3}).to(dt) : randint(-4, 4, {7, 3}, TensorOptions(dt));
    Tensor bias = is_floating(dt) ? randn({3}).to(dt) : randint(-4, 4, {3}, TensorOptions(dt));
    Tensor res =
        is_floating(dt) ? randn({2, 5, 3}).to(dt) : randint(-4, 4, {2, 5, 3}, TensorOptions(dt));
    std::vector<double> want[2];
    for (int d = 0; d < 2; ++d) {
      const Device dev = d == 0 ? Device() : kGpu;
      Tensor ad = a.to(dev), bd = b.to(dev), biasd = bias.to(dev), resd = res.to(dev);
      Tensor c = empty({2, 5, 3}, TensorOptions(dt).device(dev));
      backend::Backend& be = backend::backend(dev);
      backend::Gemm g;
      g.device = dev;
      g.dtype = dt;
      g.batch = 2, g.m = 5, g.n = 3, g.k = 7;
      g.a = {ad.data_ptr(), 35, 7, 1};
      g.b = {bd.data_ptr(), 0, 3, 1};
      g.c = c.data_ptr();
      g.c_batch_stride = 15, g.c_row_stride = 3, g.c_col_stride = 1;
      g.epilogue.bias = biasd.data_ptr();
      g.epilogue.activation = "relu";
      g.epilogue.residual = resd.data_ptr();
      g.epilogue.residual_batch_stride = 15, g.epilogue.residual_row_stride = 3;
      g.epilogue.residual_col_stride = 1;
      be.gemm(g, be.current_stream(dev));
      want[d] = vals(c);
    }
    smelt_test::expect_close(want[1], want[0], dt == float16 ? 2e-3 : 1e-6);
  }
}

TEST(Cuda, SixtyFourBitIndexing) {
  SMELT_SKIP_WITHOUT_CUDA();
  // 2^31 + 7 elements (2 GiB of int8): contiguous, broadcast and strided kernels.
  const int64_t n = (int64_t{1} << 31) + 7;
  Tensor x = ones({n}, TensorOptions(int8).device(kGpu));
  Tensor y = x + gpu({2}, {1}, int8);  // broadcast operand: the strided kernel
  EXPECT_EQ(y[n - 1].item<int64_t>(), 3);
  EXPECT_EQ(y[0].item<int64_t>(), 3);
  Tensor z = y.slice(0, 1, n, 2).to(int16);  // strided converting copy
  EXPECT_EQ(z.numel(), (n - 1 + 1) / 2);
  EXPECT_EQ(z[z.numel() - 1].item<int64_t>(), 3);
  EXPECT_EQ(x.sum().item<int64_t>(), n);
  y = Tensor();
  z = Tensor();
  x = Tensor();
  cuda::empty_cache();
}
