// The seed model written the way a user would: eager, then compiled.
//   ./build/examples/seed_mlp
#include <smelt/smelt.h>

#include <chrono>
#include <cstdio>

namespace nn = smelt::nn;

template <class F>
double best_ms(F&& f, int runs = 10) {
  double best = 1e30;
  for (int i = 0; i < runs; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    f();
    auto t1 = std::chrono::steady_clock::now();
    best = std::min(best, std::chrono::duration<double, std::milli>(t1 - t0).count());
  }
  return best;
}

int main() {
  smelt::manual_seed(0);
  auto model = nn::Sequential(nn::Linear(1024, 1024), nn::GELU(), nn::Linear(1024, 512), nn::GELU(),
                              nn::Linear(512, 10));
  smelt::Tensor x = smelt::randn({256, 1024});
  smelt::NoGradGuard no_grad;  // inference: record no autograd graph

  smelt::Tensor y = model(x);  // eager
  double eager = best_ms([&] { y = model(x); });

  auto compiled = smelt::compile(model);  // no change to the model
  smelt::Tensor y2 = compiled(x);         // the first call compiles
  double comp = best_ms([&] { y2 = compiled(x); });

  double max_diff = smelt::amax(smelt::abs(y - y2)).item<double>();
  std::printf(
      "output [%ld, %ld], eager %.3f ms, compiled %.3f ms (%.2fx), max |eager - compiled| = %.2e\n",
      static_cast<long>(y.size(0)), static_cast<long>(y.size(1)), eager, comp, eager / comp,
      max_diff);
  std::printf("kernels:");
  for (auto& k : compiled.stats().kernel_names) std::printf(" %s", k.c_str());
  std::printf("\n");
  return max_diff < 1e-4 ? 0 : 1;
}
