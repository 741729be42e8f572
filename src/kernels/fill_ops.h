// smelt/kernels/fill_ops.h — the element formulas of the arange and linspace
// factories, written once for the CPU (src/backend/cpu/fill.cpp) and CUDA
// (src/backend/cuda/fill.cu) fills, after PyTorch's CPU kernels (its
// accumulate types: int64 for integer outputs, double for floating ones;
// linspace computes in float for float32, in double otherwise). Host and
// device; not embedded.
#pragma once
#include <cstdint>
#include <type_traits>

#include "kernels/scalar_ops.h"

namespace smelt::fill {

/// arange's element i of output type T from the start and step as int64 (used
/// for integer T) and as double (bool and floating T).
template <class T>
SMELT_HD T arange_element(int64_t i, int64_t start_i, int64_t step_i, double start_d,
                          double step_d) {
  if constexpr (std::is_same_v<T, bool>) {
    return (start_d + step_d * static_cast<double>(i)) != 0.0;
  } else if constexpr (std::is_integral_v<T>) {
    return static_cast<T>(scalar::wrap_add(start_i, scalar::wrap_mul(step_i, i)));
  } else if constexpr (std::is_floating_point_v<T>) {
    return static_cast<T>(start_d + step_d * static_cast<double>(i));
  } else {
    return T(static_cast<float>(start_d + step_d * static_cast<double>(i)));
  }
}

/// The type linspace computes in for output type T.
template <class T>
using linspace_t = std::conditional_t<std::is_same_v<T, float>, float, double>;

/// linspace's element i of `steps` (>= 2) from start to end: PyTorch's
/// symmetric formula (the first half counts up from start, the second down
/// from end, so both endpoints are exact).
template <class T>
SMELT_HD T linspace_element(int64_t i, int64_t steps, double start, double end) {
  using S = linspace_t<T>;
  const S s = static_cast<S>(start), e = static_cast<S>(end);
  const S step = (e - s) / static_cast<S>(steps - 1);
  const S v =
      i < steps / 2 ? s + step * static_cast<S>(i) : e - step * static_cast<S>(steps - i - 1);
  if constexpr (std::is_same_v<T, bool>) {
    return v != S(0);
  } else if constexpr (scalar::is_half_v<T>) {
    return T(static_cast<float>(v));
  } else if constexpr (std::is_integral_v<T>) {
    return scalar::cast<T>(v);
  } else {
    return static_cast<T>(v);
  }
}

}  // namespace smelt::fill
