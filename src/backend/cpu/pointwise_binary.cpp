// Eager CPU kernels of the binary and ternary pointwise functors
// (kernels/pointwise_list.h: one instantiation per functor and compute type of
// its set). Built once per CPU capability (capability.h).
#include "backend/cpu/pointwise.h"

namespace smelt::cpu::SMELT_CPU_CAP::pw {

namespace {
SMELT_PW_BINARY_ARITH(SMELT_PW_DEFINE_FUNCTOR)
SMELT_PW_BINARY_COMPARE(SMELT_PW_DEFINE_FUNCTOR)
SMELT_PW_TERNARY(SMELT_PW_DEFINE_FUNCTOR)
}  // namespace

PointwiseTable binary_pointwise_kernels() {
  return {SMELT_PW_BINARY_ARITH(SMELT_PW_TABLE_ROW) SMELT_PW_BINARY_COMPARE(SMELT_PW_TABLE_ROW)
              SMELT_PW_TERNARY(SMELT_PW_TABLE_ROW)};
}

}  // namespace smelt::cpu::SMELT_CPU_CAP::pw

SMELT_REGISTER_DISPATCH(binary_pointwise_stub,
                        &::smelt::cpu::SMELT_CPU_CAP::pw::binary_pointwise_kernels);
