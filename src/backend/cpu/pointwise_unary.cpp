// Eager CPU kernels of the unary pointwise functors (kernels/pointwise_list.h:
// one instantiation per functor and compute type of its set). Built once per
// CPU capability (capability.h).
#include "backend/cpu/pointwise.h"
#include "backend/cpu/unary_runs.h"

namespace smelt::cpu::SMELT_CPU_CAP::pw {

namespace {
SMELT_PW_UNARY_FLOAT(SMELT_PW_DEFINE_FUNCTOR)
SMELT_PW_UNARY_OTHER(SMELT_PW_DEFINE_FUNCTOR)
}  // namespace

// float exp, sigmoid, silu, sqrt and log in whole blocks (unary_runs.h: the same bits).
template <>
struct BlockRun<exp_functor, float> {
  static constexpr bool kHas = true;
  static void run(float* o, const float* a, int64_t n) { exp_run(o, a, n); }
};
template <>
struct BlockRun<sigmoid_functor, float> {
  static constexpr bool kHas = true;
  static void run(float* o, const float* a, int64_t n) { sigmoid_run(o, a, n); }
};
template <>
struct BlockRun<silu_functor, float> {
  static constexpr bool kHas = true;
  static void run(float* o, const float* a, int64_t n) { sigmoid_run<true>(o, a, n); }
};
template <>
struct BlockRun<sqrt_functor, float> {
  static constexpr bool kHas = true;
  static void run(float* o, const float* a, int64_t n) { sqrt_run(o, a, n); }
};

template <>
struct BlockRun<log_functor, float> {
  static constexpr bool kHas = true;
  static void run(float* o, const float* a, int64_t n) { log_run(o, a, n); }
};

// float sin and cos in whole runs (unary_runs.h: the same bits).
template <>
struct BlockRun<sin_functor, float> {
  static constexpr bool kHas = true;
  static void run(float* o, const float* a, int64_t n) { trig_run<false>(o, a, n); }
};
template <>
struct BlockRun<cos_functor, float> {
  static constexpr bool kHas = true;
  static void run(float* o, const float* a, int64_t n) { trig_run<true>(o, a, n); }
};

// float tanh, erf and GELU in whole runs (unary_runs.h: the same bits).
template <>
struct BlockRun<tanh_functor, float> {
  static constexpr bool kHas = true;
  static void run(float* o, const float* a, int64_t n) { vmath::tanh_n(o, a, n); }
};
template <>
struct BlockRun<erf_functor, float> {
  static constexpr bool kHas = true;
  static void run(float* o, const float* a, int64_t n) { vmath::erf_n(o, a, n); }
};
template <>
struct BlockRun<gelu_functor, float> {
  static constexpr bool kHas = true;
  static void run(float* o, const float* a, int64_t n) { gelu_run(o, a, n); }
};

PointwiseTable unary_pointwise_kernels() {
  return {SMELT_PW_UNARY_FLOAT(SMELT_PW_TABLE_ROW) SMELT_PW_UNARY_OTHER(SMELT_PW_TABLE_ROW)};
}

}  // namespace smelt::cpu::SMELT_CPU_CAP::pw

SMELT_REGISTER_DISPATCH(unary_pointwise_stub,
                        &::smelt::cpu::SMELT_CPU_CAP::pw::unary_pointwise_kernels);
