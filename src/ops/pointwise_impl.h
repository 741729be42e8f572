// Eager CPU machinery shared by the pointwise op files (internal to src/ops/pointwise*.cpp).
//
// A kernel is instantiated per (functor, compute type C) only. Rows (from
// for_each_row: broadcasting, coalescing, OpenMP) are processed in blocks: each
// input block is converted to C into a small buffer unless it already is C and
// contiguous, the functor runs over plain C arrays (a loop the compiler can
// vectorize), and results are converted to the output dtype unless they already
// are of it. Loads/stores are shared by all functors (load_block/store_block),
// so mixed input dtypes cost no extra instantiations.
#pragma once
#include <algorithm>
#include <array>
#include <type_traits>
#include <utility>
#include <vector>

#include "backend/cpu/loops.h"
#include "kernels/scalar_ops.h"
#include "ops/pointwise.h"

namespace smelt::detail::pw {

/// Compute-type sets an op supports (bit mask over categories of C).
enum : int { kB = 1, kI = 2, kF = 4, kIB = kI | kB, kIF = kI | kF, kAll = kB | kI | kF };

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

/// out (fresh, contiguous) = f(C(in_0), ..., C(in_{N-1})) with broadcasting.
template <class C, size_t N, class F>
void run_kernel(const Tensor& out, const std::vector<Tensor>& in, const F& f) {
  using R = decltype(result_of<C, F>(std::make_index_sequence<N>{}));
  constexpr DType cdt = dtype_of<C>::value;
  constexpr DType rdt = dtype_of<R>::value;
  const DType odt = out.dtype();
  std::array<DType, N> idt;
  std::vector<char*> ptrs{static_cast<char*>(out.data_ptr())};
  std::vector<std::vector<int64_t>> strides{cpu::broadcast_byte_strides(out, out.sizes())};
  for (size_t k = 0; k < N; ++k) {
    idt[k] = in[k].dtype();
    ptrs.push_back(static_cast<char*>(in[k].data_ptr()));
    strides.push_back(cpu::broadcast_byte_strides(in[k], out.sizes()));
  }
  cpu::for_each_row(out.sizes(), std::move(ptrs), std::move(strides),
                    [&](char** p, const int64_t* s, int64_t n) {
                      alignas(64) C buf[N][kBlock];
                      alignas(64) R obuf[kBlock];
                      const bool direct = odt == rdt && s[0] == static_cast<int64_t>(sizeof(R));
                      for (int64_t i0 = 0; i0 < n; i0 += kBlock) {
                        const int64_t m = std::min(kBlock, n - i0);
                        const C* a[N];
                        for (size_t k = 0; k < N; ++k) {
                          const char* src = p[k + 1] + i0 * s[k + 1];
                          if (idt[k] == cdt && s[k + 1] == static_cast<int64_t>(sizeof(C))) {
                            a[k] = reinterpret_cast<const C*>(src);
                          } else {
                            load_block<C>(src, s[k + 1], idt[k], m, buf[k]);
                            a[k] = buf[k];
                          }
                        }
                        char* dst = p[0] + i0 * s[0];
                        R* o = direct ? reinterpret_cast<R*>(dst) : obuf;
                        compute<R, C>(o, a, m, f, std::make_index_sequence<N>{});
                        if (!direct) store_block<R>(obuf, dst, s[0], odt, m);
                      }
                    });
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

/// True when dtype `t`'s category is in Set.
inline bool in_set(int set, DType t) {
  int cat = t == DType::Bool ? kB : is_floating(t) ? kF : kI;
  return (set & cat) != 0;
}

/// Converts an attribute scalar to the compute type.
template <class C>
C scalar_to(const Scalar& s) {
  if (s.is_floating()) {
    if constexpr (std::is_floating_point_v<C>) {
      return static_cast<C>(s.to_double());
    } else if constexpr (std::is_same_v<C, bool>) {
      return s.to_double() != 0.0;
    } else {
      return static_cast<C>(s.to_int());
    }
  }
  if (s.is_bool()) return static_cast<C>(s.to_int() != 0);
  return static_cast<C>(s.to_int());
}

/// Raises the ZeroDivisionError PyTorch raises for integer division by zero
/// (called by the eager kernel before it writes anything).
void check_int_divisor(const char* op, const Tensor& divisor, DType dtype);

struct Launch {
  const char* op;      // user-facing name for errors
  const char* record;  // op-table name recorded in the graph
  DType dtype;         // compute dtype ("dtype" attr)
  DType out_dtype;
  Attrs attrs;
  bool int_zero_check = false;  // check inputs[1] for integer zero divisors
};

/// Validates, records/runs one pointwise op over `inputs` (original dtypes).
/// `make(Tag<C>)` returns the element lambda taking N values of C.
template <int Set, size_t N, class Make>
Tensor launch(Launch l, const std::vector<Tensor>& inputs, const Make& make) {
  SMELT_INTERNAL_ASSERT(inputs.size() == N, "{}: expected {} inputs", l.op, N);
  for (auto& t : inputs) SMELT_CHECK(t.defined(), "{}: got an undefined tensor", l.op);
  Shape shape = broadcast_all(inputs, l.op);
  SMELT_CHECK(in_set(Set, l.dtype), "{}: not implemented for dtype {}; convert the input first",
              l.op, dtype_name(l.dtype));
  Device dev = inputs[0].device();
  for (auto& t : inputs) {
    if (t.is_wrapped_number()) continue;
    if (inputs[0].is_wrapped_number()) dev = t.device();
    SMELT_CHECK(t.device() == dev, "{}: expected all tensors on the same device, got {} and {}",
                l.op, dev.str(), t.device().str());
  }
  Attrs attrs;
  attrs.set("dtype", l.dtype);
  for (auto& [k, v] : l.attrs.items) attrs.set(k, v);
  const DType dtype = l.dtype;
  const char* op = l.op;
  const bool zero_check = l.int_zero_check;
  return run_op1(l.record, inputs, attrs, {shape, l.out_dtype, dev},
                 [&](const std::vector<Tensor>& outs) {
                   if (zero_check && outs[0].numel() > 0) check_int_divisor(op, inputs[1], dtype);
                   dispatch<Set>(opmath_type(dtype), op, [&](auto tag) {
                     using C = typename decltype(tag)::type;
                     run_kernel<C, N>(outs[0], inputs, make(tag));
                   });
                 });
}

}  // namespace smelt::detail::pw

/// Element lambda maker for a functor without extra arguments.
#define SMELT_PW_FN(name)                                               \
  [](auto tag_) {                                                       \
    using C_ = typename decltype(tag_)::type;                           \
    return [](auto... v_) { return ::smelt::scalar::name<C_>(v_...); }; \
  }
