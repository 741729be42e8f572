// Google Benchmark: eager vs compiled for the seed workloads at sizes that run
// quickly. `./build/smelt_benchmarks`; `smelt bench` has the full-size table.
#include <benchmark/benchmark.h>

#include "smelt/autograd.h"
#include "smelt/compile.h"
#include "smelt/nn.h"
#include "smelt/ops.h"

using namespace smelt;

namespace {

Tensor sigmoid_fma(const Tensor& x, const Tensor& w, const Tensor& b) { return sigmoid(x * w + b); }

Tensor manual_softmax(const Tensor& x) {
  Tensor e = exp(x - amax(x, {-1}, true));
  return e / sum(e, {-1}, true);
}

void BM_PointwiseEager(benchmark::State& st) {
  manual_seed(0);
  Tensor x = randn({st.range(0)}), w = randn({st.range(0)}), b = randn({st.range(0)});
  for (auto _ : st) benchmark::DoNotOptimize(sigmoid_fma(x, w, b).data_ptr());
  st.SetBytesProcessed(st.iterations() * st.range(0) * 4 * 4);
}
void BM_PointwiseCompiled(benchmark::State& st) {
  manual_seed(0);
  Tensor x = randn({st.range(0)}), w = randn({st.range(0)}), b = randn({st.range(0)});
  auto f = compile(sigmoid_fma);
  f(x, w, b);
  for (auto _ : st) benchmark::DoNotOptimize(f(x, w, b).data_ptr());
  st.SetBytesProcessed(st.iterations() * st.range(0) * 4 * 4);
}
void BM_SoftmaxEager(benchmark::State& st) {
  manual_seed(0);
  Tensor x = randn({st.range(0), st.range(0)});
  for (auto _ : st) benchmark::DoNotOptimize(manual_softmax(x).data_ptr());
}
void BM_SoftmaxCompiled(benchmark::State& st) {
  manual_seed(0);
  Tensor x = randn({st.range(0), st.range(0)});
  auto f = compile(manual_softmax);
  f(x);
  for (auto _ : st) benchmark::DoNotOptimize(f(x).data_ptr());
}
void BM_MlpEager(benchmark::State& st) {
  manual_seed(0);
  auto model = nn::Sequential(nn::Linear(1024, 1024), nn::GELU(), nn::Linear(1024, 512), nn::GELU(),
                              nn::Linear(512, 10));
  Tensor x = randn({st.range(0), 1024});
  NoGradGuard no_grad;  // inference (the parameters require grad)
  for (auto _ : st) benchmark::DoNotOptimize(model(x).data_ptr());
}
void BM_MlpCompiled(benchmark::State& st) {
  manual_seed(0);
  auto model = nn::Sequential(nn::Linear(1024, 1024), nn::GELU(), nn::Linear(1024, 512), nn::GELU(),
                              nn::Linear(512, 10));
  Tensor x = randn({st.range(0), 1024});
  NoGradGuard no_grad;  // compiled inference (the parameters require grad)
  auto f = compile(model);
  f(x);
  for (auto _ : st) benchmark::DoNotOptimize(f(x).data_ptr());
}

}  // namespace

BENCHMARK(BM_PointwiseEager)->Arg(1 << 20)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_PointwiseCompiled)->Arg(1 << 20)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_SoftmaxEager)->Arg(1024)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_SoftmaxCompiled)->Arg(1024)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_MlpEager)->Arg(256)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_MlpCompiled)->Arg(256)->Unit(benchmark::kMillisecond);
BENCHMARK_MAIN();
