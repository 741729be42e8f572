// smelt/kernels/reduce_jit.h — out-of-line folds of contiguous rows for
// JIT-generated C++ (embedded, never compiled into the library itself).
//
// A generated reduction whose element is read straight from memory (a load,
// or a row buffer that a persistent kernel filled) folds its row with
// InnerOrder<Op>::stretch over a reduce::ContiguousRun: the code that every
// kernel instantiated again, and most of the g++ time of a reduction kernel
// (softmax's unit: 0.33 s, 0.14 s without the two folds). The toolchain's
// math object (backend/cpu/toolchain.cpp) defines them once per kernel cache,
// with the kernels' own flags, for the accumulators listed below; a kernel
// calls jit_stretch, the declaration here, and links them; likewise
// InnerOrder::result() (jit_result), which folds the row's last partial into
// its cascade. The folds are the same code with the same flags (their chunk
// grouping, which changes no bit, aside), so the bits are those of the inline
// instantiation (and of eager's reductions, as reduce_ops.h explains).
// Other accumulators take the inline template at the end.
//
// Defined where SMELT_REDUCE_JIT_DEFINE is set (the math object), declared
// elsewhere (the kernels' preamble). Hidden: each kernel library links its
// own copy, which nothing outside it can interpose.
#pragma once

#include <cstdint>

#include "kernels/reduce_ops.h"

namespace smelt::reduce {

/// (accumulator, its type, element type) with an out-of-line fold: the
/// elements are the accumulator's own type, but for Welford<double>, which
/// also folds float elements (in float lanes, reduce_ops.h's
/// welford_float_lanes, as eager's var and layer_norm of float32 and a
/// generated element lambda of a widened float32 pass them).
#define SMELT_REDUCE_JIT_FOLDS(X) \
  X(Sum, float, float)            \
  X(Max, float, float)            \
  X(Min, float, float)            \
  X(Sum, double, double)          \
  X(Max, double, double)          \
  X(Min, double, double)          \
  X(Welford, double, double)      \
  X(Welford, double, float)

#ifdef SMELT_REDUCE_JIT_DEFINE
namespace {
/// The math object's own ContiguousRun tag (see ContiguousRun).
struct JitRunTag {};
}  // namespace
#define SMELT_REDUCE_JIT_FOLD(OP, A, T)                                                         \
  __attribute__((visibility("hidden"))) void jit_stretch(InnerOrder<OP<A>>& order, int64_t r0,  \
                                                         int64_t r1, int64_t run, const T* p) { \
    order.template stretch<true>(r0, r1, run, ContiguousRun<T, JitRunTag>{p});                  \
  }
#else
#define SMELT_REDUCE_JIT_FOLD(OP, A, T)                                                        \
  __attribute__((visibility("hidden"))) void jit_stretch(InnerOrder<OP<A>>& order, int64_t r0, \
                                                         int64_t r1, int64_t run, const T* p);
#endif
/// order.stretch<true>(r0, r1, run, the contiguous run at p) (InnerOrder's
/// stretch: the elements [r0, r1) of a row in runs of `run`, element r at p[r]).
SMELT_REDUCE_JIT_FOLDS(SMELT_REDUCE_JIT_FOLD)
#undef SMELT_REDUCE_JIT_FOLD

/// (accumulator, its type) whose InnerOrder::result() is out of line too: the
/// cascade it folds the last partial into took 40 of a layer_norm kernel's
/// 105 ms of g++ (-O3, precompiled preamble).
#define SMELT_REDUCE_JIT_RESULTS(X) \
  X(Sum, float)                     \
  X(Max, float)                     \
  X(Min, float)                     \
  X(Sum, double)                    \
  X(Max, double)                    \
  X(Min, double)                    \
  X(Welford, double)
#ifdef SMELT_REDUCE_JIT_DEFINE
#define SMELT_REDUCE_JIT_RESULT(OP, A)                                                            \
  __attribute__((visibility("hidden"))) OP<A>::acc_t jit_result(const InnerOrder<OP<A>>& order) { \
    return order.result();                                                                        \
  }
#else
#define SMELT_REDUCE_JIT_RESULT(OP, A) \
  __attribute__((visibility("hidden"))) OP<A>::acc_t jit_result(const InnerOrder<OP<A>>& order);
#endif
/// order.result() (InnerOrder: the row's partial folded into its cascade).
SMELT_REDUCE_JIT_RESULTS(SMELT_REDUCE_JIT_RESULT)
#undef SMELT_REDUCE_JIT_RESULT

#ifndef SMELT_REDUCE_JIT_DEFINE
namespace {
/// The unit's own ContiguousRun tag (an instantiation of its own, see
/// ContiguousRun): this header is embedded into each generated unit.
struct JitUnitTag {};
}  // namespace
/// The same for any other order and element type, inline (an exact
/// out-of-line overload above is preferred to this template).
template <class Order, class T>
inline void jit_stretch(Order& order, int64_t r0, int64_t r1, int64_t run, const T* p) {
  order.template stretch<true>(r0, r1, run, ContiguousRun<T, JitUnitTag>{p});
}
/// The same for any other order (an exact out-of-line overload above is
/// preferred to this template).
template <class Order>
inline auto jit_result(const Order& order) {
  return order.result();
}
#endif

}  // namespace smelt::reduce
