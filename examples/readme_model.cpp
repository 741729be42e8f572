// The README's first example, quoted there whole: the seed model with PyTorch's
// weights, run eagerly and through smelt::compile. Run it from the repository
// root: it reads ../shared/data/seed_mlp.safetensors (the shared/ folder beside
// the repository), or the file given as its first argument.
#include <smelt/smelt.h>

#include <iostream>
#include <string>

namespace nn = smelt::nn;

int main(int argc, char** argv) {
  const std::string path = argc > 1 ? argv[1] : "../shared/data/seed_mlp.safetensors";
  auto model = nn::Sequential(nn::Linear(1024, 1024), nn::GELU(), nn::Linear(1024, 512), nn::GELU(),
                              nn::Linear(512, 10));
  // The file holds PyTorch's state_dict ("0.weight", "0.bias", ...) and also the
  // input and output PyTorch computed. strict=false loads the model's tensors and
  // lists the others; the default, strict=true, raises smelt::Error on them.
  auto skipped = model->load(path, /*strict=*/false);
  for (auto& key : skipped.unexpected_keys) std::cout << "not in the model: " << key << "\n";

  smelt::NoGradGuard no_grad;  // inference: the parameters require grad, record no graph
  auto file = smelt::load_safetensors(path);
  smelt::Tensor x = file.at("input");  // [256, 1024]
  smelt::Tensor y = model(x);          // eager: one kernel per op

  auto compiled = smelt::compile(model);  // no change to the model
  smelt::Tensor y2 = compiled(x);         // first call traces, fuses, generates C++, builds it
  std::cout << y2.size(0) << " x " << y2.size(1) << "\n";  // 256 x 10
  for (auto& k : compiled.stats().kernel_names) std::cout << k << "\n";
  // cpp_tem_fused_addmm_gelu_0, cpp_tem_fused_addmm_gelu_1, cpp_tem_fused_addmm_2

  double eager_err = (y - file.at("output")).abs().max().item<double>();
  double compiled_err = (y2 - file.at("output")).abs().max().item<double>();
  std::cout << "max |eager - PyTorch| = " << eager_err
            << ", max |compiled - PyTorch| = " << compiled_err << "\n";
  return eager_err < 1e-4 && compiled_err < 1e-4 ? 0 : 1;
}
