// A program outside smelt's source tree: one eager op chain and the same
// function through smelt::compile (the JIT generates, builds and loads a
// kernel), then the two results compared. Prints what check_install.cmake
// expects: "compiled == eager: yes" and the kernel's name.
#include <smelt/smelt.h>

#include <iostream>

int main() {
  smelt::Tensor x = smelt::arange(12, smelt::DType::Float32);
  smelt::Tensor w = smelt::full({12}, 0.5);
  auto f = smelt::compile(
      [](const smelt::Tensor& a, const smelt::Tensor& b) { return smelt::sigmoid(a * b + 1); });
  smelt::Tensor eager = smelt::sigmoid(x * w + 1);
  smelt::Tensor compiled = f(x, w);
  double diff = smelt::max(smelt::abs(compiled - eager)).item<double>();
  std::cout << "compiled == eager: " << (diff <= 1e-6 ? "yes" : "no") << "\n";
  for (const auto& name : f.stats().kernel_names) std::cout << "kernel: " << name << "\n";
  return diff <= 1e-6 ? 0 : 1;
}
