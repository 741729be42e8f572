// The README's autograd example, quoted there whole: gradients with PyTorch's
// semantics, and a few steps of gradient descent written by hand.
#include <smelt/smelt.h>

#include <iostream>

using smelt::Tensor;

int main() {
  smelt::manual_seed(0);
  Tensor x = smelt::randn({64, 3});
  Tensor y = smelt::matmul(x, smelt::from_vector<float>({1.5f, -2.0f, 0.5f}, {3})) + 0.25;

  auto model = smelt::nn::Linear(3, 1);  // its parameters require grad
  double first = 0, last = 0;
  for (int step = 0; step < 100; ++step) {
    Tensor loss = smelt::mse_loss(model(x).squeeze(1), y);
    loss.backward();  // fills weight.grad() and bias.grad()
    {
      smelt::NoGradGuard no_grad;  // the update is not part of any graph
      for (auto& p : model->parameters()) {
        p.sub_(p.grad() * 0.1);
        p.mutable_grad() = Tensor();  // zero_grad(set_to_none=true)
      }
    }
    (step == 0 ? first : last) = loss.item<double>();
  }
  std::cout << "loss " << first << " -> " << last << "\n";

  // autograd::grad returns gradients instead of accumulating them; with
  // create_graph=true the backward is recorded too, for second derivatives.
  Tensor t = smelt::from_vector<double>({2.0}, {1}).requires_grad_();
  Tensor d = smelt::autograd::grad({(t * t * t).sum()}, {t}, {}, std::nullopt, true)[0];
  Tensor d2 = smelt::autograd::grad({d.sum()}, {t})[0];
  std::cout << "d/dt t^3 = " << d.item<double>() << ", d2/dt2 = " << d2.item<double>() << "\n";
  return last < first * 0.01 && d2.item<double>() == 12.0 ? 0 : 1;  // 3 t^2 = 12, 6 t = 12
}
