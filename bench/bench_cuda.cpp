// Google Benchmark: smelt eager on a GPU, timed with CUDA events (manual time:
// the device time of one call, after warm-up; 20 timed calls, whose median
// is the counter median_ms beside Google Benchmark's mean). The workloads and sizes of
// issue 8's targets, for comparison with bench/torch_compare.py --workload
// eager-cuda (the same ops, sizes and dtypes in PyTorch eager):
//   ./build/smelt_benchmarks --benchmark_filter=Cuda
// Every benchmark reports "no CUDA device" and skips where there is no GPU.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <vector>

#include "smelt/cuda.h"
#include "smelt/nn.h"
#include "smelt/ops.h"

using namespace smelt;

namespace {

const Device kGpu("cuda:0");

/// Timed calls per benchmark: as bench/torch_compare.py's --iters default, so
/// both sides time the same number of calls after the same warm-up.
constexpr int kIters = 20;

/// The median of one benchmark's per-iteration times, in ms, as the counter
/// median_ms (Google Benchmark itself reports the mean; torch_compare.py
/// takes the median on both sides).
void report_median(benchmark::State& st, std::vector<double> ms) {
  if (ms.empty()) return;
  std::sort(ms.begin(), ms.end());
  const size_t n = ms.size();
  st.counters["median_ms"] = n % 2 ? ms[n / 2] : (ms[n / 2 - 1] + ms[n / 2]) / 2;
}

/// Times f() with CUDA events (3 warm-up calls first); false when there is no GPU.
/// The counter host_ms is the median wall time the host spends in f() itself
/// (launching, not waiting): when it is close to median_ms, the call is bound
/// by the host, not by its kernels.
bool run_timed(benchmark::State& st, const std::function<void()>& f) {
  if (!cuda::is_available()) {
    st.SkipWithError("no CUDA device");
    return false;
  }
  for (int i = 0; i < 3; ++i) f();
  cuda::synchronize();
  cuda::Event start, stop;
  std::vector<double> ms, host_ms;
  for (auto _ : st) {
    start.record();
    const auto t0 = std::chrono::steady_clock::now();
    f();
    host_ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    stop.record();
    stop.synchronize();
    ms.push_back(start.elapsed_time(stop));
    st.SetIterationTime(ms.back() / 1e3);
  }
  report_median(st, std::move(ms));
  if (!host_ms.empty()) {
    std::sort(host_ms.begin(), host_ms.end());
    st.counters["host_ms"] = host_ms[host_ms.size() / 2];
  }
  return true;
}

Tensor randn_on(const Shape& s, DType dt = float32) {
  return randn(s, TensorOptions().device(kGpu)).to(dt);
}

constexpr int64_t kN = int64_t{1} << 26;

void BM_CudaUnary(benchmark::State& st, Tensor (*op)(const Tensor&)) {
  if (!cuda::is_available()) return (void)run_timed(st, {});
  manual_seed(0);
  Tensor x = randn_on({kN});
  if (run_timed(st, [&] { benchmark::DoNotOptimize(op(x).data_ptr()); }))
    st.SetBytesProcessed(st.iterations() * kN * 4 * 2);
}
void BM_CudaBinary(benchmark::State& st, Tensor (*op)(const Tensor&, const Tensor&)) {
  if (!cuda::is_available()) return (void)run_timed(st, {});
  manual_seed(0);
  Tensor x = randn_on({kN}), y = randn_on({kN});
  if (run_timed(st, [&] { benchmark::DoNotOptimize(op(x, y).data_ptr()); }))
    st.SetBytesProcessed(st.iterations() * kN * 4 * 3);
}
Tensor exp_(const Tensor& x) { return exp(x); }
Tensor relu_(const Tensor& x) { return relu(x); }
Tensor sigmoid_(const Tensor& x) { return sigmoid(x); }
Tensor gelu_(const Tensor& x) { return gelu(x); }
Tensor clone_(const Tensor& x) { return x.clone(); }
Tensor add_(const Tensor& x, const Tensor& y) { return x + y; }
Tensor mul_(const Tensor& x, const Tensor& y) { return x * y; }
BENCHMARK_CAPTURE(BM_CudaUnary, exp, exp_)->UseManualTime()->Iterations(kIters);
BENCHMARK_CAPTURE(BM_CudaUnary, relu, relu_)->UseManualTime()->Iterations(kIters);
BENCHMARK_CAPTURE(BM_CudaUnary, sigmoid, sigmoid_)->UseManualTime()->Iterations(kIters);
BENCHMARK_CAPTURE(BM_CudaUnary, gelu, gelu_)->UseManualTime()->Iterations(kIters);
BENCHMARK_CAPTURE(BM_CudaUnary, copy, clone_)->UseManualTime()->Iterations(kIters);
BENCHMARK_CAPTURE(BM_CudaBinary, add, add_)->UseManualTime()->Iterations(kIters);
BENCHMARK_CAPTURE(BM_CudaBinary, mul, mul_)->UseManualTime()->Iterations(kIters);

void BM_CudaReduceLastDim(benchmark::State& st, bool is_max) {
  if (!cuda::is_available()) return (void)run_timed(st, {});
  manual_seed(0);
  Tensor x = randn_on({8192, 8192});
  if (run_timed(st, [&] {
        benchmark::DoNotOptimize((is_max ? amax(x, {-1}) : sum(x, {-1})).data_ptr());
      }))
    st.SetBytesProcessed(st.iterations() * 8192 * 8192 * 4);
}
BENCHMARK_CAPTURE(BM_CudaReduceLastDim, sum, false)->UseManualTime()->Iterations(kIters);
BENCHMARK_CAPTURE(BM_CudaReduceLastDim, amax, true)->UseManualTime()->Iterations(kIters);

void BM_CudaSoftmaxBf16(benchmark::State& st) {
  if (!cuda::is_available()) return (void)run_timed(st, {});
  manual_seed(0);
  Tensor x = randn_on({16384, 4096}, bfloat16);
  if (run_timed(st, [&] { benchmark::DoNotOptimize(softmax(x, -1).data_ptr()); }))
    st.SetBytesProcessed(st.iterations() * 16384 * 4096 * 2 * 2);
}
BENCHMARK(BM_CudaSoftmaxBf16)->UseManualTime()->Iterations(kIters);

void BM_CudaLayerNormBf16(benchmark::State& st) {
  if (!cuda::is_available()) return (void)run_timed(st, {});
  manual_seed(0);
  Tensor x = randn_on({16384, 4096}, bfloat16);
  Tensor w = randn_on({4096}, bfloat16), b = randn_on({4096}, bfloat16);
  if (run_timed(st,
                [&] { benchmark::DoNotOptimize(layer_norm(x, {4096}, w, b, 1e-5).data_ptr()); }))
    st.SetBytesProcessed(st.iterations() * 16384 * 4096 * 2 * 2);
}
BENCHMARK(BM_CudaLayerNormBf16)->UseManualTime()->Iterations(kIters);

/// The seed MLP (1024 -> 1024 -> 512 -> 10, GELU) forward at batch 256.
void BM_CudaSeedMlp(benchmark::State& st, DType dt) {
  if (!cuda::is_available()) return (void)run_timed(st, {});
  manual_seed(0);
  nn::Sequential net(nn::Linear(1024, 1024), nn::GELU(), nn::Linear(1024, 512), nn::GELU(),
                     nn::Linear(512, 10));
  net->to(dt);
  net->to(kGpu);
  Tensor x = randn_on({256, 1024}, dt);
  run_timed(st, [&] { benchmark::DoNotOptimize(net->forward(x).data_ptr()); });
}
BENCHMARK_CAPTURE(BM_CudaSeedMlp, float32, float32)->UseManualTime()->Iterations(kIters);
BENCHMARK_CAPTURE(BM_CudaSeedMlp, bfloat16, bfloat16)->UseManualTime()->Iterations(kIters);

void BM_CudaMatmul(benchmark::State& st, DType dt) {
  if (!cuda::is_available()) return (void)run_timed(st, {});
  manual_seed(0);
  const int64_t n = 8192;
  Tensor a = randn_on({n, n}, dt), b = randn_on({n, n}, dt);
  if (run_timed(st, [&] { benchmark::DoNotOptimize(matmul(a, b).data_ptr()); }))
    st.counters["TFLOP/s"] =
        benchmark::Counter(2.0 * n * n * n * st.iterations() / 1e12, benchmark::Counter::kIsRate);
}
BENCHMARK_CAPTURE(BM_CudaMatmul, float32, float32)->UseManualTime()->Iterations(kIters);
BENCHMARK_CAPTURE(BM_CudaMatmul, bfloat16, bfloat16)->UseManualTime()->Iterations(kIters);

/// Warm-up launches before the host-cost loops (as torch_compare.py's): enough
/// that the first host-cost row does not read higher than the later ones.
constexpr int kHostWarmup = 2000;

/// Host-side cost of one small eager op: wall time of 1000 launches (then one
/// synchronization, untimed) per iteration; the counter us_per_op divides it.
void BM_CudaSmallOpHostCost(benchmark::State& st) {
  if (!cuda::is_available()) {
    st.SkipWithError("no CUDA device");
    return;
  }
  Tensor x = randn_on({16}), y = randn_on({16});
  for (int i = 0; i < kHostWarmup; ++i) benchmark::DoNotOptimize((x + y).data_ptr());
  cuda::synchronize();
  std::vector<double> ms;
  for (auto _ : st) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < 1000; ++i) benchmark::DoNotOptimize((x + y).data_ptr());
    const auto t1 = std::chrono::steady_clock::now();
    cuda::synchronize();
    ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    st.SetIterationTime(ms.back() / 1e3);
  }
  report_median(st, std::move(ms));
  st.counters["us_per_op"] = benchmark::Counter(
      st.iterations() * 1000.0 / 1e6, benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_CudaSmallOpHostCost)->UseManualTime()->Iterations(kIters);

/// The same host-side cost for other kinds of small op (a C++ number operand,
/// a unary op, a reduction, a fused softmax), on 16 elements.
void BM_CudaSmallOpHostCostOp(benchmark::State& st, Tensor (*op)(const Tensor&)) {
  if (!cuda::is_available()) {
    st.SkipWithError("no CUDA device");
    return;
  }
  Tensor x = randn_on({16});
  for (int i = 0; i < kHostWarmup; ++i) benchmark::DoNotOptimize(op(x).data_ptr());
  cuda::synchronize();
  std::vector<double> ms;
  for (auto _ : st) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < 1000; ++i) benchmark::DoNotOptimize(op(x).data_ptr());
    const auto t1 = std::chrono::steady_clock::now();
    cuda::synchronize();
    ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    st.SetIterationTime(ms.back() / 1e3);
  }
  report_median(st, std::move(ms));
  st.counters["us_per_op"] = benchmark::Counter(
      st.iterations() * 1000.0 / 1e6, benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
Tensor mul_number_(const Tensor& x) { return x * 2.0; }
Tensor sum_last_(const Tensor& x) { return sum(x, {-1}); }
Tensor softmax_last_(const Tensor& x) { return softmax(x, -1); }
BENCHMARK_CAPTURE(BM_CudaSmallOpHostCostOp, mul_number, mul_number_)
    ->UseManualTime()
    ->Iterations(kIters);
BENCHMARK_CAPTURE(BM_CudaSmallOpHostCostOp, relu, relu_)->UseManualTime()->Iterations(kIters);
BENCHMARK_CAPTURE(BM_CudaSmallOpHostCostOp, sum, sum_last_)->UseManualTime()->Iterations(kIters);
BENCHMARK_CAPTURE(BM_CudaSmallOpHostCostOp, softmax, softmax_last_)
    ->UseManualTime()
    ->Iterations(kIters);

}  // namespace
