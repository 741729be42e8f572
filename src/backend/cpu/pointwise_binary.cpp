// Eager CPU kernels of the binary and ternary pointwise functors (one
// instantiation per functor and compute type of its set). Built once per CPU
// capability (capability.h).
#include "backend/cpu/pointwise.h"

namespace smelt::cpu::SMELT_CPU_CAP::pw {

namespace {
SMELT_PW_FUNCTOR(add)
SMELT_PW_FUNCTOR(add_alpha)
SMELT_PW_FUNCTOR(sub)
SMELT_PW_FUNCTOR(sub_alpha)
SMELT_PW_FUNCTOR(mul)
SMELT_PW_FUNCTOR(div)
SMELT_PW_FUNCTOR(div_trunc)
SMELT_PW_FUNCTOR(div_floor)
SMELT_PW_FUNCTOR(remainder)
SMELT_PW_FUNCTOR(fmod)
SMELT_PW_FUNCTOR(pow)
SMELT_PW_FUNCTOR(maximum)
SMELT_PW_FUNCTOR(minimum)
SMELT_PW_FUNCTOR(fmax)
SMELT_PW_FUNCTOR(fmin)
SMELT_PW_FUNCTOR(atan2)
SMELT_PW_FUNCTOR(eq)
SMELT_PW_FUNCTOR(ne)
SMELT_PW_FUNCTOR(lt)
SMELT_PW_FUNCTOR(le)
SMELT_PW_FUNCTOR(gt)
SMELT_PW_FUNCTOR(ge)
SMELT_PW_FUNCTOR(logical_and)
SMELT_PW_FUNCTOR(logical_or)
SMELT_PW_FUNCTOR(logical_xor)
SMELT_PW_FUNCTOR(bitwise_and)
SMELT_PW_FUNCTOR(bitwise_or)
SMELT_PW_FUNCTOR(bitwise_xor)
SMELT_PW_FUNCTOR(where)
SMELT_PW_FUNCTOR(clamp)
SMELT_PW_FUNCTOR(clamp_min)
SMELT_PW_FUNCTOR(clamp_max)
SMELT_PW_FUNCTOR(lerp)
}  // namespace

PointwiseTable binary_pointwise_kernels() {
  return {
      SMELT_PW_ENTRY(add, 2, 0, kAll),       SMELT_PW_ENTRY(add_alpha, 2, 1, kAll),  // alpha
      SMELT_PW_ENTRY(sub, 2, 0, kIF),        SMELT_PW_ENTRY(sub_alpha, 2, 1, kIF),   // alpha
      SMELT_PW_ENTRY(mul, 2, 0, kAll),       SMELT_PW_ENTRY(div, 2, 0, kF),
      SMELT_PW_ENTRY(div_trunc, 2, 0, kIF),  SMELT_PW_ENTRY(div_floor, 2, 0, kIF),
      SMELT_PW_ENTRY(remainder, 2, 0, kIF),  SMELT_PW_ENTRY(fmod, 2, 0, kIF),
      SMELT_PW_ENTRY(pow, 2, 0, kIF),        SMELT_PW_ENTRY(maximum, 2, 0, kAll),
      SMELT_PW_ENTRY(minimum, 2, 0, kAll),   SMELT_PW_ENTRY(fmax, 2, 0, kAll),
      SMELT_PW_ENTRY(fmin, 2, 0, kAll),      SMELT_PW_ENTRY(atan2, 2, 0, kF),
      SMELT_PW_ENTRY(eq, 2, 0, kAll),        SMELT_PW_ENTRY(ne, 2, 0, kAll),
      SMELT_PW_ENTRY(lt, 2, 0, kAll),        SMELT_PW_ENTRY(le, 2, 0, kAll),
      SMELT_PW_ENTRY(gt, 2, 0, kAll),        SMELT_PW_ENTRY(ge, 2, 0, kAll),
      SMELT_PW_ENTRY(logical_and, 2, 0, kB), SMELT_PW_ENTRY(logical_or, 2, 0, kB),
      SMELT_PW_ENTRY(logical_xor, 2, 0, kB), SMELT_PW_ENTRY(bitwise_and, 2, 0, kIB),
      SMELT_PW_ENTRY(bitwise_or, 2, 0, kIB), SMELT_PW_ENTRY(bitwise_xor, 2, 0, kIB),
      SMELT_PW_ENTRY(where, 3, 0, kAll),     SMELT_PW_ENTRY(clamp, 3, 0, kIF),
      SMELT_PW_ENTRY(clamp_min, 2, 0, kIF),  SMELT_PW_ENTRY(clamp_max, 2, 0, kIF),
      SMELT_PW_ENTRY(lerp, 3, 0, kF),
  };
}

}  // namespace smelt::cpu::SMELT_CPU_CAP::pw

SMELT_REGISTER_DISPATCH(binary_pointwise_stub,
                        &::smelt::cpu::SMELT_CPU_CAP::pw::binary_pointwise_kernels);
