// smelt/kernels/gemm_epilogue.h — the activations a GEMM backend applies in
// its epilogue (C = act(A @ B + bias) + residual), backend-neutral: the op
// table maps an op (and its attrs) to one of them, the scheduler folds that op
// into the GEMM, and each GEMM backend implements every value (oneDNN post-ops
// on the CPU; the generic loop below elsewhere). The generic loop calls the
// same scalar functors as the eager ops, so a fused and an unfused activation
// compute the same function.
#pragma once
#include <optional>
#include <string_view>

#include "kernels/scalar_ops.h"

namespace smelt {

/// Names follow oneDNN's eltwise algorithms (eltwise_relu, eltwise_gelu_erf, ...).
enum class EpilogueActivation {
  None,      // no activation (also: the op cannot be folded into a GEMM)
  Relu,      // scalar::relu
  GeluErf,   // scalar::gelu: x * Phi(x), the erf form (PyTorch approximate="none")
  GeluTanh,  // scalar::gelu_tanh (PyTorch approximate="tanh")
  Sigmoid,   // scalar::sigmoid (oneDNN eltwise_logistic)
  Silu,      // scalar::silu (oneDNN eltwise_swish with alpha 1)
  Tanh,      // scalar::tanh
};

inline constexpr EpilogueActivation kEpilogueActivations[] = {
    EpilogueActivation::None,     EpilogueActivation::Relu,    EpilogueActivation::GeluErf,
    EpilogueActivation::GeluTanh, EpilogueActivation::Sigmoid, EpilogueActivation::Silu,
    EpilogueActivation::Tanh};

/// The spelling used in schedules, logs and GemmEpilogue::activation: "" for None,
/// else "relu", "gelu_erf", "gelu_tanh", "sigmoid", "silu", "tanh".
constexpr std::string_view epilogue_activation_name(EpilogueActivation a) {
  switch (a) {
    case EpilogueActivation::None:
      return "";
    case EpilogueActivation::Relu:
      return "relu";
    case EpilogueActivation::GeluErf:
      return "gelu_erf";
    case EpilogueActivation::GeluTanh:
      return "gelu_tanh";
    case EpilogueActivation::Sigmoid:
      return "sigmoid";
    case EpilogueActivation::Silu:
      return "silu";
    case EpilogueActivation::Tanh:
      return "tanh";
  }
  return "?";
}

/// The activation named `name` (epilogue_activation_name's spelling); nullopt when unknown.
constexpr std::optional<EpilogueActivation> parse_epilogue_activation(std::string_view name) {
  for (EpilogueActivation a : kEpilogueActivations)
    if (epilogue_activation_name(a) == name) return a;
  return std::nullopt;
}

/// act(x) in the accumulate type A. Integer types support only None and Relu
/// (the caller checks; the others return x unchanged for them).
template <class A>
SMELT_HD A apply_epilogue_activation(EpilogueActivation act, A x) {
  switch (act) {
    case EpilogueActivation::None:
      return x;
    case EpilogueActivation::Relu:
      return scalar::relu<A>(x);
    default:
      break;
  }
  if constexpr (std::is_floating_point_v<A>) {
    switch (act) {
      case EpilogueActivation::GeluErf:
        return scalar::gelu<A>(x);
      case EpilogueActivation::GeluTanh:
        return scalar::gelu_tanh<A>(x);
      case EpilogueActivation::Sigmoid:
        return scalar::sigmoid<A>(x);
      case EpilogueActivation::Silu:
        return scalar::silu<A>(x);
      case EpilogueActivation::Tanh:
        return scalar::tanh<A>(x);
      default:
        break;
    }
  }
  return x;
}

/// One element of C = act(v + bias) + residual, computed in the accumulate type
/// Acc (float for float16 / bfloat16, int64 for integers, where the additions
/// wrap); `bias` / `residual` point at the element's operand or are null.
template <class Acc, class T>
SMELT_HD Acc apply_epilogue(Acc v, const T* bias, EpilogueActivation act, const T* residual) {
  if constexpr (std::is_integral_v<Acc>) {
    if (bias) v = static_cast<Acc>(static_cast<uint64_t>(v) + static_cast<uint64_t>(*bias));
  } else {
    if (bias) v += static_cast<Acc>(*bias);
  }
  v = apply_epilogue_activation<Acc>(act, v);
  if (residual) {
    const Acc r = static_cast<Acc>(*residual);
    if constexpr (std::is_integral_v<Acc>) {
      v = static_cast<Acc>(static_cast<uint64_t>(v) + static_cast<uint64_t>(r));
    } else {
      v += r;
    }
  }
  return v;
}

}  // namespace smelt
