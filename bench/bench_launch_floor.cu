// Google Benchmark: the floor under the host cost of a small eager CUDA op on
// this machine, an empty kernel launched through cudaLaunchKernel (<<<>>>)
// with three pointer arguments on the legacy default stream (where smelt's
// and PyTorch's eager ops go by default): wall time of 1000 launches per
// iteration (then one synchronization, untimed), the median as median_ms. On
// the H200 host it read 3.2 to 4.6 us per launch across machines, so
// BM_CudaSmallOpHostCost minus this row is what smelt itself adds.
#include <benchmark/benchmark.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <vector>

namespace {

__global__ void empty_kernel(const float* a, const float* b, float* out) {
  if (out != nullptr && threadIdx.x == 1024) out[0] = a[0] + b[0];  // never true: no work
}

void BM_CudaLaunchFloor(benchmark::State& st) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    (void)cudaGetLastError();
    st.SkipWithError("no CUDA device");
    return;
  }
  float* p = nullptr;
  if (cudaMalloc(&p, 3 * sizeof(float)) != cudaSuccess) {
    st.SkipWithError("cudaMalloc failed");
    return;
  }
  for (int i = 0; i < 100; ++i) empty_kernel<<<1, 32>>>(p, p + 1, p + 2);
  if (cudaDeviceSynchronize() != cudaSuccess) {
    st.SkipWithError("empty kernel failed");
    (void)cudaFree(p);
    return;
  }
  std::vector<double> ms;
  for (auto _ : st) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < 1000; ++i) empty_kernel<<<1, 32>>>(p, p + 1, p + 2);
    const auto t1 = std::chrono::steady_clock::now();
    (void)cudaDeviceSynchronize();
    ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    st.SetIterationTime(ms.back() / 1e3);
  }
  std::sort(ms.begin(), ms.end());
  st.counters["median_ms"] = ms[ms.size() / 2];
  st.counters["us_per_op"] = benchmark::Counter(
      st.iterations() * 1000.0 / 1e6, benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  (void)cudaFree(p);
}
BENCHMARK(BM_CudaLaunchFloor)->UseManualTime()->Iterations(20);

}  // namespace
