// Eager CPU pointwise kernels: the loop machinery of the kernel sources
// (pointwise.cpp, pointwise_unary.cpp, pointwise_binary.cpp), which are built
// once per CPU capability (capability.h): everything here lives in namespace
// smelt::cpu::SMELT_CPU_CAP::pw, and only those sources include this header.
// The kernel record and the lookup by functor name are in pointwise_table.h.
//
// A kernel is instantiated per (functor, compute type C) only. Rows (from
// for_each_row: broadcasting, coalescing, OpenMP; or, where every input is
// contiguous like the output or one element, one row split by parallel_for
// directly; or, where inputs repeat as a contiguous trailing block of the
// output's sizes, rows of that block's length) are processed in blocks: each
// input block is converted to C into a small buffer unless it already is C
// and contiguous, the functor runs over plain C arrays (a loop the compiler
// can vectorize), and results are converted to the output dtype unless they
// already are of it; a row whose operands all are read and written in place
// is one block. Loads/stores are shared by all functors (load_block /
// store_block), so mixed input dtypes cost no extra instantiations.
#pragma once
#include <algorithm>
#include <array>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "backend/cpu/loops.h"
#include "backend/cpu/pointwise_table.h"
#include "kernels/pointwise_list.h"  // the X-macro lists the kernel sources expand
#include "kernels/scalar_ops.h"
#include "smelt/scalar.h"

#ifndef SMELT_CPU_CAP
#error "pointwise.h is for the kernel sources built once per CPU capability (capability.h)"
#endif

namespace smelt::cpu::SMELT_CPU_CAP::pw {

// Compute-type sets an op supports (kernels/pointwise_list.h).
using ::smelt::cpu::pw::kAll;
using ::smelt::cpu::pw::kB;
using ::smelt::cpu::pw::kF;
using ::smelt::cpu::pw::kI;
using ::smelt::cpu::pw::kIB;
using ::smelt::cpu::pw::kIF;
using ::smelt::cpu::pw::PointwiseKernel;
using ::smelt::cpu::pw::PointwiseTable;
using ::smelt::pw::unrounded_single_operand;

template <class T>
struct Tag {
  using type = T;
};

/// Elements per block of the buffered inner loop.
inline constexpr int64_t kBlock = 512;

/// dst[i] = C(src[i * stride]) for an element of dtype `from` (stride in bytes, may be 0).
template <class C>
void load_block(const char* src, int64_t stride, DType from, int64_t n, C* dst);
/// dst[i * stride] = (dtype `to`)(src[i]) (stride in bytes).
template <class R>
void store_block(const R* src, char* dst, int64_t stride, DType to, int64_t n);
/// p[i] = float(to(p[i])) for `to` float16 or bfloat16: an operand rounded to
/// the common dtype before its float computation (rounds_to_common).
void round_block(float* p, int64_t n, DType to);

#define SMELT_PW_EXTERN(T)                                                      \
  extern template void load_block<T>(const char*, int64_t, DType, int64_t, T*); \
  extern template void store_block<T>(const T*, char*, int64_t, DType, int64_t);
SMELT_PW_EXTERN(bool)
SMELT_PW_EXTERN(uint8_t)
SMELT_PW_EXTERN(int8_t)
SMELT_PW_EXTERN(int16_t)
SMELT_PW_EXTERN(int32_t)
SMELT_PW_EXTERN(int64_t)
SMELT_PW_EXTERN(float)
SMELT_PW_EXTERN(double)
#undef SMELT_PW_EXTERN

// C repeated once per index. A class, not an alias template: Clang (14 and 16)
// collapses `Alias<C, I>...` of an alias that ignores I into one argument.
template <class C, size_t>
struct Ith {
  using type = C;
};
template <class C, class F, size_t... I>
auto result_of(std::index_sequence<I...>)
    -> std::invoke_result_t<const F&, typename Ith<C, I>::type...>;

template <class R, class C, class F, size_t... I>
inline void compute(R* __restrict o, const C* const* in, int64_t n, const F& f,
                    std::index_sequence<I...>) {
  std::array<const C*, sizeof...(I)> p{in[I]...};
  for (int64_t i = 0; i < n; ++i) o[i] = f(p[I][i]...);
}

/// compute() where every operand after the first is one value (c[k - 1] for
/// operand k) along the block: the loop keeps them in registers, and the
/// compiler takes what depends on them alone (clamp's NaN checks of its
/// bounds) out of it: a function of its own, since GCC 12 does not unswitch
/// the loop inlined into run_kernel's (clamp: 4 instead of 6 vector
/// instructions). The same functor on the same values: the same bits.
template <class R, class C, class F, size_t... I>
__attribute__((noinline)) void compute_const(R* __restrict o, const C* __restrict a, const C* c,
                                             int64_t n, const F& f, std::index_sequence<I...>) {
  const std::array<C, sizeof...(I)> v{c[I]...};
  for (int64_t i = 0; i < n; ++i) o[i] = f(a[i], v[I]...);
}

/// A whole-block kernel of the unary functor Fn at compute type C, bit for bit
/// the functor's loop and faster (unary_runs.h): specializations (in the
/// kernel source that defines Fn) set kHas and define
/// `static void run(C* o, const C* a, int64_t n)`. None by default.
template <class Fn, class C>
struct BlockRun {
  static constexpr bool kHas = false;
};

/// A whole-block kernel of the binary functor Fn at compute type C whose
/// second operand is one value along the block (x ** 2.5), bit for bit
/// compute_const's loop and faster (unary_runs.h): specializations set kHas
/// and define `static void run(C* o, const C* a, C b, int64_t n)`. None by
/// default.
template <class Fn, class C>
struct BlockRunConst {
  static constexpr bool kHas = false;
};

/// out (fresh, contiguous) = f(C(in_0), ..., C(in_{N-1})) with broadcasting,
/// an operand first rounded to the compute dtype `common` where
/// rounds_to_common says so, except a wrapped number (its NumberRule
/// converted it) and, where `single_unrounded` (unrounded_single_operand), a
/// one-element second operand; blocks go through BlockRun<Fn, C> where it has
/// a kernel.
template <class C, size_t N, class Fn, class F>
void run_kernel(DType common, bool single_unrounded, const Tensor& out,
                const std::vector<Tensor>& in, const F& f) {
  using R = decltype(result_of<C, F>(std::make_index_sequence<N>{}));
  constexpr DType cdt = dtype_of<C>::value;
  constexpr DType rdt = dtype_of<R>::value;
  const DType odt = out.dtype();
  std::array<DType, N> idt;
  std::array<bool, N> rounds{};  // operand k is rounded to `common` after its load
  for (size_t k = 0; k < N; ++k) {
    idt[k] = in[k].dtype();
    if constexpr (std::is_same_v<C, float>)
      rounds[k] = !in[k].is_wrapped_number() && rounds_to_common(idt[k], common) &&
                  !(k == 1 && single_unrounded && in[k].numel() == 1);
  }
  // Operand k read in place: of the compute type and not rounded.
  const auto in_place = [&](size_t k) { return idt[k] == cdt && !rounds[k]; };
  // load_block, then the rounding to `common` where operand k takes it.
  const auto load = [&](size_t k, const char* src, int64_t stride, int64_t m, C* dst) {
    load_block<C>(src, stride, idt[k], m, dst);
    if constexpr (std::is_same_v<C, float>)
      if (rounds[k]) round_block(dst, m, common);
  };
  const auto row = [&](char** p, const int64_t* s, int64_t n) {
    alignas(64) C buf[N][kBlock];
    alignas(64) R obuf[kBlock];
    const bool direct = odt == rdt && s[0] == static_cast<int64_t>(sizeof(R));
    // A broadcast input (stride 0): its one value first.
    for (size_t k = 0; k < N; ++k)
      if (s[k + 1] == 0) load(k, p[k + 1], 0, 1, buf[k]);
    // Floating operands after the first all one value along the row (x * 0.5,
    // clamp(x, -1, 1), x + a column): compute_const.
    bool rest_const = false;
    C cval[N > 1 ? N - 1 : 1] = {};
    if constexpr (N >= 2 && std::is_floating_point_v<C>) {
      rest_const = true;
      for (size_t k = 1; k < N; ++k) {
        rest_const = rest_const && s[k + 1] == 0;
        if (s[k + 1] == 0) cval[k - 1] = buf[k][0];
      }
    }
    // A broadcast input the loop reads as an array fills its buffer once per
    // row (not those compute_const takes as values: filling 512 of them per
    // row of a 2048 x 1024 + 2048 x 1 sum cost a third of its time).
    for (size_t k = 0; k < N; ++k)
      if (s[k + 1] == 0 && (k == 0 || !rest_const))
        load(k, p[k + 1], 0, std::min(kBlock, n), buf[k]);
    // Every operand read in place (C, contiguous) or a value of compute_const,
    // and the result written in place: the row in one call, without a block's
    // bookkeeping, call and vzeroupper per 512 elements.
    bool whole = direct;
    for (size_t k = 0; k < N; ++k)
      whole = whole && ((in_place(k) && s[k + 1] == static_cast<int64_t>(sizeof(C))) ||
                        (k >= 1 && rest_const));
    const int64_t step = whole ? n : kBlock;
    for (int64_t i0 = 0; i0 < n; i0 += step) {
      const int64_t m = std::min(step, n - i0);
      const C* a[N];
      for (size_t k = 0; k < N; ++k) {
        const char* src = p[k + 1] + i0 * s[k + 1];
        if (in_place(k) && s[k + 1] == static_cast<int64_t>(sizeof(C))) {
          a[k] = reinterpret_cast<const C*>(src);
        } else {
          if (s[k + 1] != 0) load(k, src, s[k + 1], m, buf[k]);
          a[k] = buf[k];
        }
      }
      char* dst = p[0] + i0 * s[0];
      R* o = direct ? reinterpret_cast<R*>(dst) : obuf;
      if constexpr (N == 1 && std::is_same_v<R, C> && BlockRun<Fn, C>::kHas) {
        BlockRun<Fn, C>::run(o, a[0], m);
      } else if constexpr (N >= 2 && std::is_floating_point_v<C>) {
        if (rest_const) {
          if constexpr (N == 2 && std::is_same_v<R, C> && BlockRunConst<Fn, C>::kHas)
            BlockRunConst<Fn, C>::run(o, a[0], cval[0], m);
          else
            compute_const<R, C>(o, a[0], cval, m, f, std::make_index_sequence<N - 1>{});
        } else {
          compute<R, C>(o, a, m, f, std::make_index_sequence<N>{});
        }
      } else {
        compute<R, C>(o, a, m, f, std::make_index_sequence<N>{});
      }
      if (!direct) store_block<R>(obuf, dst, s[0], odt, m);
    }
  };
  // Every input contiguous with the output's sizes or one element (x + y,
  // clamp(x, -1, 1)): one long row split by parallel_for as for_each_row
  // splits it, without its vectors of pointers and strides and the
  // coalescing (a dozen allocations per call of a three-operand op, on the
  // path every thread waits for). Inputs that are a contiguous trailing block
  // of the output's sizes (a bias row: x + b with b of x's last dims) repeat
  // with that block's length as the period: rows of the period, each a call
  // of `row` (or of the functor's loop itself, below).
  const int64_t numel = out.numel();
  bool flat = numel > 0 && out.is_contiguous();
  int64_t period = numel;
  for (size_t k = 0; k < N && flat; ++k) {
    const Tensor& t = in[k];
    if (t.numel() == 1 || (t.sizes() == out.sizes() && t.is_contiguous())) continue;
    flat = t.is_contiguous() && t.numel() > 1 && is_trailing_block(t.sizes(), out.sizes()) &&
           (period == numel || period == t.numel());
    period = t.numel();
  }
  if (flat) {
    std::array<char*, N + 1> base;
    std::array<int64_t, N + 1> st;
    std::array<bool, N + 1> repeats{};
    base[0] = static_cast<char*>(out.data_ptr());
    st[0] = static_cast<int64_t>(out.element_size());
    std::array<RowBlockCopy, N + 1> moved;  // one per repeating input: each keeps its own copy
    for (size_t k = 0; k < N; ++k) {
      base[k + 1] = static_cast<char*>(in[k].data_ptr());
      st[k + 1] = in[k].numel() == 1 ? 0 : static_cast<int64_t>(in[k].element_size());
      repeats[k + 1] = period < numel && in[k].numel() == period;
      if (repeats[k + 1])
        base[k + 1] =
            moved[k + 1].away_from_stores(base[k + 1], period * st[k + 1], base[0], period * st[0]);
    }
    if (period == numel) {
      parallel_for(0, numel, kParallelGrain, [&](int64_t b, int64_t e) {
        std::array<char*, N + 1> p;
        for (size_t k = 0; k <= N; ++k) p[k] = base[k] + b * st[k];
        row(p.data(), st.data(), e - b);
      });
      return;
    }
    // Operands all of the compute dtype and read in place, the result stored
    // in place: each row straight into the functor's loop (`row`'s per-call
    // checks cost as much as a row of a thousand elements takes to stream).
    bool direct = odt == rdt;
    for (size_t k = 0; k < N; ++k) direct = direct && in_place(k) && st[k + 1] != 0;
    parallel_for(0, numel / period, grain_for(period), [&](int64_t r0, int64_t r1) {
      std::array<char*, N + 1> p;
      for (int64_t r = r0; r < r1; ++r) {
        for (size_t k = 0; k <= N; ++k) p[k] = repeats[k] ? base[k] : base[k] + r * period * st[k];
        if (direct) {
          std::array<const C*, N> a;
          for (size_t k = 0; k < N; ++k) a[k] = reinterpret_cast<const C*>(p[k + 1]);
          compute<R, C>(reinterpret_cast<R*>(p[0]), a.data(), period, f,
                        std::make_index_sequence<N>{});
        } else {
          row(p.data(), st.data(), period);
        }
      }
    });
    return;
  }
  std::vector<char*> ptrs{static_cast<char*>(out.data_ptr())};
  std::vector<std::vector<int64_t>> strides{broadcast_byte_strides(out, out.sizes())};
  for (size_t k = 0; k < N; ++k) {
    ptrs.push_back(static_cast<char*>(in[k].data_ptr()));
    strides.push_back(broadcast_byte_strides(in[k], out.sizes()));
  }
  for_each_row(out.sizes(), std::move(ptrs), std::move(strides), row);
}

/// Calls g(Tag<C>{}) for compute dtype `c` when its category is in Set.
template <int Set, class G>
void dispatch(DType c, const char* op, const G& g) {
  switch (c) {
    case DType::Bool:
      if constexpr ((Set & kB) != 0) return g(Tag<bool>{});
      break;
    case DType::UInt8:
      if constexpr ((Set & kI) != 0) return g(Tag<uint8_t>{});
      break;
    case DType::Int8:
      if constexpr ((Set & kI) != 0) return g(Tag<int8_t>{});
      break;
    case DType::Int16:
      if constexpr ((Set & kI) != 0) return g(Tag<int16_t>{});
      break;
    case DType::Int32:
      if constexpr ((Set & kI) != 0) return g(Tag<int32_t>{});
      break;
    case DType::Int64:
      if constexpr ((Set & kI) != 0) return g(Tag<int64_t>{});
      break;
    case DType::Float32:
      if constexpr ((Set & kF) != 0) return g(Tag<float>{});
      break;
    case DType::Float64:
      if constexpr ((Set & kF) != 0) return g(Tag<double>{});
      break;
    default:
      break;
  }
  SMELT_INTERNAL_ASSERT(false, "{}: no kernel for compute dtype {}", op, dtype_name(c));
}

/// The kernel running `F::call<C>(inputs..., extras...)` over N inputs with E
/// extras, for the compute types of Set.
template <int Set, size_t N, size_t E, class F>
PointwiseKernel make_kernel() {
  PointwiseKernel k;
  k.arity = static_cast<int>(N);
  k.n_extra = static_cast<int>(E);
  k.set = Set;
  k.run = [](DType compute, const Tensor& out, const std::vector<Tensor>& in,
             const std::vector<Scalar>& extra) {
    [[maybe_unused]] static const bool single_unrounded = unrounded_single_operand(F::name());
    dispatch<Set>(opmath_type(compute), F::name(), [&](auto tag) {
      using C = typename decltype(tag)::type;
      std::array<C, E> ex{};
      if constexpr (E > 0)
        for (size_t i = 0; i < E; ++i) ex[i] = scalar_to<C>(extra[i]);
      run_kernel<C, N, F>(compute, single_unrounded, out, in, [ex](auto... v) {
        return std::apply([&](auto... e) { return F::template call<C>(v..., e...); }, ex);
      });
    });
  };
  return k;
}

}  // namespace smelt::cpu::SMELT_CPU_CAP::pw

/// Defines the functor wrapper of smelt::scalar::`fn` (at namespace scope).
#define SMELT_PW_FUNCTOR(fn)                  \
  struct fn##_functor {                       \
    static const char* name() { return #fn; } \
    template <class C, class... A>            \
    static auto call(A... a) {                \
      return ::smelt::scalar::fn<C>(a...);    \
    }                                         \
  };

/// A PointwiseTable entry for the functor `fn` (defined by SMELT_PW_FUNCTOR)
/// with `arity` operands and `extra` trailing attribute arguments,
/// instantiated for compute-type set `set`.
#define SMELT_PW_ENTRY(fn, arity, extra, set) \
  { #fn, ::smelt::cpu::SMELT_CPU_CAP::pw::make_kernel < set, arity, extra, fn##_functor>() }

/// X-macro adapters over the lists of kernels/pointwise_list.h.
#define SMELT_PW_DEFINE_FUNCTOR(fn, arity, extra, set) SMELT_PW_FUNCTOR(fn)
#define SMELT_PW_TABLE_ROW(fn, arity, extra, set) SMELT_PW_ENTRY(fn, arity, extra, set),
