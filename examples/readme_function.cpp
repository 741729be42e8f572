// The README's second example, quoted there whole: a function compiled with
// the signature it has, and Tensor methods and operators as in libtorch.
#include <smelt/smelt.h>

#include <iostream>

using smelt::Tensor;

int main() {
  smelt::manual_seed(0);
  Tensor x = smelt::randn({64, 128}), w = smelt::randn({128}), b = smelt::randn({128});

  auto f = smelt::compile([](const Tensor& x, const Tensor& w, const Tensor& b) {
    return smelt::sigmoid(x * w + b);  // one kernel: cpp_poi_fused_add_mul_sigmoid_0
  });
  Tensor out = f(x, w, b);
  std::cout << f.stats().kernel_names.at(0) << "\n";

  // The same with methods, and numbers on either side of an operator.
  Tensor again = (x * w + b).sigmoid();
  Tensor high = (out > 0.5).sum();  // int64, 0-dim
  std::cout << high.item<int64_t>() << " of " << out.numel() << " above 0.5\n";
  return (out - again).abs().max().item<double>() < 1e-6 ? 0 : 1;
}
