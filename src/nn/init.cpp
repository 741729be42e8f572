// nn::init: in-place initializers drawing from the global generator. Like
// PyTorch's (torch.no_grad inside), they write with grad mode off, so they
// may initialize parameters, which are leaves that require grad.
#include "smelt/nn/init.h"

#include <cmath>

#include "core/tensor_impl.h"
#include "smelt/autograd.h"
#include "smelt/ops.h"

namespace smelt::nn::init {

namespace {
thread_local bool skip_random_init = false;

void check_floating(const Tensor& t, const char* op) {
  SMELT_CHECK(t.defined(), "{}: undefined tensor", op);
  SMELT_CHECK(is_floating(t.dtype()),
              "{}: tensor of dtype {} cannot hold random floating values; use a floating "
              "tensor (float16/bfloat16/float32/float64)",
              op, dtype_name(t.dtype()));
}

// Draws in float64 (so every dtype sees the same values before rounding), maps
// each value with f, then copies into t.
template <class F>
Tensor& fill_from(Tensor& t, Tensor draw, F f) {
  Tensor c = draw.contiguous();
  double* p = c.data_ptr<double>();
  for (int64_t i = 0, n = c.numel(); i < n; ++i) p[i] = f(p[i]);
  NoGradGuard no_grad;
  t.copy_(c);
  return t;
}
}  // namespace

NoInitGuard::NoInitGuard() : previous_(skip_random_init) { skip_random_init = true; }
NoInitGuard::~NoInitGuard() { skip_random_init = previous_; }

Tensor& uniform_(Tensor& t, double low, double high) {
  check_floating(t, "uniform_");
  SMELT_CHECK(low <= high, "uniform_: expects low <= high, got low={} high={}", low, high);
  if (t.numel() == 0) return t;
  if (skip_random_init) {
    NoGradGuard no_grad;
    return t.zero_();
  }
  return fill_from(t, rand(t.sizes(), DType::Float64),
                   [&](double u) { return low + (high - low) * u; });
}

Tensor& normal_(Tensor& t, double mean, double std) {
  check_floating(t, "normal_");
  SMELT_CHECK(std >= 0, "normal_: expects std >= 0.0, got std={}", std);
  if (t.numel() == 0) return t;
  if (skip_random_init) {
    NoGradGuard no_grad;
    return t.zero_();
  }
  return fill_from(t, randn(t.sizes(), DType::Float64), [&](double z) { return mean + std * z; });
}

Tensor& constant_(Tensor& t, double value) {
  SMELT_CHECK(t.defined(), "constant_: undefined tensor");
  NoGradGuard no_grad;
  t.fill_(value);
  return t;
}

Tensor& zeros_(Tensor& t) { return constant_(t, 0.0); }
Tensor& ones_(Tensor& t) { return constant_(t, 1.0); }

std::pair<int64_t, int64_t> calculate_fan_in_and_fan_out(const Tensor& t) {
  SMELT_CHECK(t.defined() && t.dim() >= 2,
              "calculate_fan_in_and_fan_out: fan in and fan out cannot be computed for a tensor "
              "with fewer than 2 dimensions (shape {})",
              t.defined() ? detail::shape_str(t.sizes()) : std::string("undefined"));
  int64_t receptive = 1;
  for (int64_t d = 2; d < t.dim(); ++d) receptive *= t.size(d);
  return {t.size(1) * receptive, t.size(0) * receptive};
}

Tensor& kaiming_uniform_(Tensor& t, double a, const std::string& mode,
                         const std::string& nonlinearity) {
  check_floating(t, "kaiming_uniform_");
  SMELT_CHECK(mode == "fan_in" || mode == "fan_out",
              "kaiming_uniform_: mode \"{}\" is not supported; use \"fan_in\" or \"fan_out\"",
              mode);
  double gain;
  if (nonlinearity == "leaky_relu") {
    gain = std::sqrt(2.0 / (1.0 + a * a));
  } else if (nonlinearity == "relu") {
    gain = std::sqrt(2.0);
  } else if (nonlinearity == "linear" || nonlinearity == "sigmoid") {
    gain = 1.0;
  } else if (nonlinearity == "tanh") {
    gain = 5.0 / 3.0;
  } else {
    detail::throw_error(fmt::format(
        "kaiming_uniform_: unsupported nonlinearity \"{}\"; use leaky_relu, relu, linear, "
        "sigmoid or tanh",
        nonlinearity));
  }
  auto [fan_in, fan_out] = calculate_fan_in_and_fan_out(t);
  int64_t fan = mode == "fan_in" ? fan_in : fan_out;
  if (fan == 0) return t;
  double bound = gain * std::sqrt(3.0 / static_cast<double>(fan));
  return uniform_(t, -bound, bound);
}

}  // namespace smelt::nn::init
