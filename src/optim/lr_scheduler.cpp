// Learning-rate schedulers (torch.optim.lr_scheduler): the base's epoch counting
// and StepLR / CosineAnnealingLR's recursive formulas, as PyTorch's get_lr().
#include <cmath>
#include <numbers>

#include "smelt/optim.h"

namespace smelt::optim {

LRScheduler::LRScheduler(Optimizer& optimizer) : optimizer_(optimizer) {
  for (size_t g = 0; g < optimizer.num_param_groups(); ++g) base_lrs_.push_back(optimizer.lr(g));
  last_lr_ = base_lrs_;
}

LRScheduler::~LRScheduler() = default;

void LRScheduler::step() {
  ++last_epoch_;
  std::vector<double> lrs = get_lr();
  for (size_t g = 0; g < lrs.size(); ++g) optimizer_.set_lr(lrs[g], g);
  last_lr_ = std::move(lrs);
}

StepLR::StepLR(Optimizer& optimizer, int64_t step_size, double gamma)
    : LRScheduler(optimizer), step_size_(step_size), gamma_(gamma) {
  SMELT_CHECK(step_size >= 1, "StepLR: step_size must be >= 1, got {}", step_size);
}

std::vector<double> StepLR::get_lr() const {
  std::vector<double> lrs;
  for (size_t g = 0; g < base_lrs_.size(); ++g) {
    const double lr = optimizer_.lr(g);
    lrs.push_back(last_epoch() % step_size_ != 0 ? lr : lr * gamma_);
  }
  return lrs;
}

CosineAnnealingLR::CosineAnnealingLR(Optimizer& optimizer, int64_t T_max, double eta_min)
    : LRScheduler(optimizer), t_max_(T_max), eta_min_(eta_min) {
  SMELT_CHECK(T_max >= 1, "CosineAnnealingLR: T_max must be >= 1, got {}", T_max);
}

std::vector<double> CosineAnnealingLR::get_lr() const {
  constexpr double pi = std::numbers::pi;
  const auto e = static_cast<double>(last_epoch());
  const auto T = static_cast<double>(t_max_);
  std::vector<double> lrs;
  for (size_t g = 0; g < base_lrs_.size(); ++g) {
    const double lr = optimizer_.lr(g);
    if ((last_epoch() - 1 - t_max_) % (2 * t_max_) == 0) {
      lrs.push_back(lr + (base_lrs_[g] - eta_min_) * (1 - std::cos(pi / T)) / 2);
    } else {
      lrs.push_back((1 + std::cos(pi * e / T)) / (1 + std::cos(pi * (e - 1) / T)) *
                        (lr - eta_min_) +
                    eta_min_);
    }
  }
  return lrs;
}

}  // namespace smelt::optim
