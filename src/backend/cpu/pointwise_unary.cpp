// Eager CPU kernels of the unary pointwise functors (one instantiation per
// functor and compute type of its set).
#include "backend/cpu/pointwise.h"

namespace smelt::cpu::SMELT_CPU_CAP::pw {

namespace {
SMELT_PW_FUNCTOR(neg)
SMELT_PW_FUNCTOR(abs)
SMELT_PW_FUNCTOR(sign)
SMELT_PW_FUNCTOR(exp)
SMELT_PW_FUNCTOR(exp2)
SMELT_PW_FUNCTOR(expm1)
SMELT_PW_FUNCTOR(log)
SMELT_PW_FUNCTOR(log2)
SMELT_PW_FUNCTOR(log1p)
SMELT_PW_FUNCTOR(sqrt)
SMELT_PW_FUNCTOR(rsqrt)
SMELT_PW_FUNCTOR(reciprocal)
SMELT_PW_FUNCTOR(sin)
SMELT_PW_FUNCTOR(cos)
SMELT_PW_FUNCTOR(tan)
SMELT_PW_FUNCTOR(tanh)
SMELT_PW_FUNCTOR(sigmoid)
SMELT_PW_FUNCTOR(erf)
SMELT_PW_FUNCTOR(relu)
SMELT_PW_FUNCTOR(gelu)
SMELT_PW_FUNCTOR(gelu_tanh)
SMELT_PW_FUNCTOR(silu)
SMELT_PW_FUNCTOR(floor)
SMELT_PW_FUNCTOR(ceil)
SMELT_PW_FUNCTOR(round)
SMELT_PW_FUNCTOR(trunc)
SMELT_PW_FUNCTOR(logical_not)
SMELT_PW_FUNCTOR(bitwise_not)
SMELT_PW_FUNCTOR(isnan)
SMELT_PW_FUNCTOR(isinf)
SMELT_PW_FUNCTOR(nan_to_num)
}  // namespace

PointwiseTable unary_pointwise_kernels() {
  return {
      SMELT_PW_ENTRY(neg, 1, 0, kIF),         SMELT_PW_ENTRY(abs, 1, 0, kIF),
      SMELT_PW_ENTRY(sign, 1, 0, kAll),       SMELT_PW_ENTRY(exp, 1, 0, kF),
      SMELT_PW_ENTRY(exp2, 1, 0, kF),         SMELT_PW_ENTRY(expm1, 1, 0, kF),
      SMELT_PW_ENTRY(log, 1, 0, kF),          SMELT_PW_ENTRY(log2, 1, 0, kF),
      SMELT_PW_ENTRY(log1p, 1, 0, kF),        SMELT_PW_ENTRY(sqrt, 1, 0, kF),
      SMELT_PW_ENTRY(rsqrt, 1, 0, kF),        SMELT_PW_ENTRY(reciprocal, 1, 0, kF),
      SMELT_PW_ENTRY(sin, 1, 0, kF),          SMELT_PW_ENTRY(cos, 1, 0, kF),
      SMELT_PW_ENTRY(tan, 1, 0, kF),          SMELT_PW_ENTRY(tanh, 1, 0, kF),
      SMELT_PW_ENTRY(sigmoid, 1, 0, kF),      SMELT_PW_ENTRY(erf, 1, 0, kF),
      SMELT_PW_ENTRY(relu, 1, 0, kIF),        SMELT_PW_ENTRY(gelu, 1, 0, kF),
      SMELT_PW_ENTRY(gelu_tanh, 1, 0, kF),    SMELT_PW_ENTRY(silu, 1, 0, kF),
      SMELT_PW_ENTRY(floor, 1, 0, kIF),       SMELT_PW_ENTRY(ceil, 1, 0, kIF),
      SMELT_PW_ENTRY(round, 1, 0, kIF),       SMELT_PW_ENTRY(trunc, 1, 0, kIF),
      SMELT_PW_ENTRY(logical_not, 1, 0, kB),  SMELT_PW_ENTRY(bitwise_not, 1, 0, kIB),
      SMELT_PW_ENTRY(isnan, 1, 0, kAll),      SMELT_PW_ENTRY(isinf, 1, 0, kAll),
      SMELT_PW_ENTRY(nan_to_num, 1, 3, kAll),  // nan, posinf, neginf
  };
}

}  // namespace smelt::cpu::SMELT_CPU_CAP::pw

SMELT_REGISTER_DISPATCH(unary_pointwise_stub,
                        &::smelt::cpu::SMELT_CPU_CAP::pw::unary_pointwise_kernels);
