// smelt/nn/init.h — in-place parameter initializers (torch.nn.init). Each
// fills `t` (any floating dtype, any strides) through copy_, drawing from the
// global generator (smelt::manual_seed), and returns it.
#pragma once
#include <cstdint>
#include <string>
#include <utility>

#include "smelt/tensor.h"

namespace smelt::nn::init {

/// While one is alive on this thread, uniform_, normal_ and kaiming_uniform_
/// fill with zeros instead of drawing (and leave the generator untouched), as
/// transformers' no_init_weights: for building a model whose weights a
/// checkpoint is about to overwrite (drawing 23 M normals costs seconds).
class NoInitGuard {
 public:
  NoInitGuard();
  ~NoInitGuard();
  NoInitGuard(const NoInitGuard&) = delete;
  NoInitGuard& operator=(const NoInitGuard&) = delete;

 private:
  bool previous_;
};

/// U(low, high). Error if low > high or t is not floating.
Tensor& uniform_(Tensor& t, double low = 0.0, double high = 1.0);
/// N(mean, std^2). Error if std < 0 or t is not floating.
Tensor& normal_(Tensor& t, double mean = 0.0, double std = 1.0);
Tensor& constant_(Tensor& t, double value);
Tensor& zeros_(Tensor& t);
Tensor& ones_(Tensor& t);
/// fan_in = size(1) * prod(size(2:)), fan_out = size(0) * prod(size(2:));
/// Error for fewer than 2 dims.
std::pair<int64_t, int64_t> calculate_fan_in_and_fan_out(const Tensor& t);
/// U(-b, b) with b = gain * sqrt(3 / fan), gain = sqrt(2 / (1 + a^2)) for
/// nonlinearity "leaky_relu" (PyTorch's default), sqrt(2) for "relu", 1 for
/// "linear"/"sigmoid"; fan = fan_in (mode "fan_in") or fan_out ("fan_out").
/// He et al. 2015. A zero fan leaves `t` unchanged (PyTorch warns likewise).
Tensor& kaiming_uniform_(Tensor& t, double a = 0.0, const std::string& mode = "fan_in",
                         const std::string& nonlinearity = "leaky_relu");

}  // namespace smelt::nn::init
