// Eager CPU kernels of the unary pointwise functors (kernels/pointwise_list.h:
// one instantiation per functor and compute type of its set). Built once per
// CPU capability (capability.h).
#include "backend/cpu/pointwise.h"

namespace smelt::cpu::SMELT_CPU_CAP::pw {

namespace {
SMELT_PW_UNARY_FLOAT(SMELT_PW_DEFINE_FUNCTOR)
SMELT_PW_UNARY_OTHER(SMELT_PW_DEFINE_FUNCTOR)
}  // namespace

PointwiseTable unary_pointwise_kernels() {
  return {SMELT_PW_UNARY_FLOAT(SMELT_PW_TABLE_ROW) SMELT_PW_UNARY_OTHER(SMELT_PW_TABLE_ROW)};
}

}  // namespace smelt::cpu::SMELT_CPU_CAP::pw

SMELT_REGISTER_DISPATCH(unary_pointwise_stub,
                        &::smelt::cpu::SMELT_CPU_CAP::pw::unary_pointwise_kernels);
