#include "golden_compare.h"

#include <cmath>
#include <vector>

#include "core/tensor_impl.h"
#include "ops/op_table.h"

namespace smelt::cli {

namespace {

/// The op's precision class from the op table (Exact for names it does not hold).
detail::Precision precision_of(const std::string& op) {
  const detail::OpDef* def = detail::find_op(op);
  return def ? def->precision : detail::Precision::Exact;
}

}  // namespace

Tolerance golden_tolerance(const std::string& op, DType dtype) {
  using P = detail::Precision;
  P c = precision_of(op);
  switch (dtype) {
    case DType::Float64:
      return {1e-7, 1e-7};
    case DType::Float32:
      if (c == P::Accumulated) return {1e-5, 1e-4};
      if (c == P::Transcendental) return {1e-5, 1e-5};
      return {1e-5, 1.3e-6};
    case DType::Float16:
      return {1e-5, c == P::Accumulated ? 2e-3 : 1e-3};
    case DType::BFloat16:
      return {1e-5, 1.6e-2};
    default:
      return {0.0, 0.0};
  }
}

std::string compare_tensors(const Tensor& got, const Tensor& want, const Tolerance& tol) {
  if (!got.defined()) return "output is undefined";
  if (got.dtype() != want.dtype())
    return fmt::format("dtype {} but PyTorch gives {}", dtype_name(got.dtype()),
                       dtype_name(want.dtype()));
  if (got.sizes() != want.sizes())
    return fmt::format("shape {} but PyTorch gives {}", detail::shape_str(got.sizes()),
                       detail::shape_str(want.sizes()));
  if (got.numel() == 0) return "";
  if (!is_floating(want.dtype())) {
    std::vector<int64_t> g = got.to_vector<int64_t>(), w = want.to_vector<int64_t>();
    int64_t bad = 0, first = -1;
    for (size_t i = 0; i < g.size(); ++i)
      if (g[i] != w[i]) {
        if (first < 0) first = static_cast<int64_t>(i);
        ++bad;
      }
    if (bad == 0) return "";
    return fmt::format("{} of {} elements differ; first at flat index {}: got {}, want {}", bad,
                       g.size(), first, g[first], w[first]);
  }
  std::vector<double> g = got.to_vector<double>(), w = want.to_vector<double>();
  int64_t bad = 0, first = -1;
  double worst = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    bool ok;
    if (std::isnan(w[i])) {
      ok = std::isnan(g[i]);
    } else if (std::isinf(w[i])) {
      ok = g[i] == w[i];
    } else {
      double err = std::fabs(g[i] - w[i]);
      ok = std::isfinite(g[i]) && err <= tol.atol + tol.rtol * std::fabs(w[i]);
      if (!ok && std::isfinite(err)) worst = std::max(worst, err);
    }
    if (!ok) {
      if (first < 0) first = static_cast<int64_t>(i);
      ++bad;
    }
  }
  if (bad == 0) return "";
  return fmt::format(
      "{} of {} elements differ; first at flat index {}: got {}, want {} (max abs error {:.3g}, "
      "atol {:g}, rtol {:g})",
      bad, g.size(), first, g[first], w[first], worst, tol.atol, tol.rtol);
}

}  // namespace smelt::cli
