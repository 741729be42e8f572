// Eager CPU kernels of the binary and ternary pointwise functors
// (kernels/pointwise_list.h: one instantiation per functor and compute type of
// its set). Built once per CPU capability (capability.h).
#include "backend/cpu/pointwise.h"
#include "backend/cpu/unary_runs.h"

namespace smelt::cpu::SMELT_CPU_CAP::pw {

namespace {
SMELT_PW_BINARY_ARITH(SMELT_PW_DEFINE_FUNCTOR)
SMELT_PW_BINARY_COMPARE(SMELT_PW_DEFINE_FUNCTOR)
SMELT_PW_TERNARY(SMELT_PW_DEFINE_FUNCTOR)
}  // namespace

// float pow with one exponent in whole blocks (unary_runs.h: the same bits).
template <>
struct BlockRunConst<pow_functor, float> {
  static constexpr bool kHas = true;
  static void run(float* o, const float* a, float b, int64_t n) { pow_run(o, a, b, n); }
};

PointwiseTable binary_pointwise_kernels() {
  return {SMELT_PW_BINARY_ARITH(SMELT_PW_TABLE_ROW) SMELT_PW_BINARY_COMPARE(SMELT_PW_TABLE_ROW)
              SMELT_PW_TERNARY(SMELT_PW_TABLE_ROW)};
}

}  // namespace smelt::cpu::SMELT_CPU_CAP::pw

SMELT_REGISTER_DISPATCH(binary_pointwise_stub,
                        &::smelt::cpu::SMELT_CPU_CAP::pw::binary_pointwise_kernels);
