// Eager CPU loop machinery: broadcasting strided iteration with dimension
// coalescing, a contiguous fast path the compiler can vectorize, and OpenMP
// across cores for large tensors. Every eager pointwise kernel is built on
// pointwise<Out, In...>(out, inputs, f).
#pragma once
#include <array>
#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "core/dtype_dispatch.h"
#include "core/tensor_impl.h"
#include "kernels/scalar_ops.h"
#include "smelt/scalar.h"

namespace smelt::cpu {

/// Elements below which a kernel runs on one thread.
inline constexpr int64_t kParallelGrain = 32768;

/// Calls `row(ptrs, strides, n)` for every innermost row of `shape`, where
/// ptrs[k] points at operand k's first element of the row and strides[k] is its
/// byte stride along the row. Dims are coalesced first; rows are split across
/// OpenMP threads when numel >= kParallelGrain.
using RowFn = std::function<void(char** ptrs, const int64_t* strides, int64_t n)>;
void for_each_row(const Shape& shape, std::vector<char*> ptrs,
                  std::vector<std::vector<int64_t>> byte_strides, const RowFn& row);

/// Byte strides of `t` as seen from an output of `out_shape` (0 along broadcast dims).
std::vector<int64_t> broadcast_byte_strides(const Tensor& t, const Shape& out_shape);

namespace loops_detail {
template <class Out, class... In, class F, size_t... I>
inline void run_row(char** p, const int64_t* s, int64_t n, const F& f, std::index_sequence<I...>) {
  Out* o = reinterpret_cast<Out*>(p[0]);
  bool contiguous = s[0] == sizeof(Out) && ((s[I + 1] == sizeof(In)) && ...);
  if (contiguous) {
    std::tuple<const In*...> in{reinterpret_cast<const In*>(p[I + 1])...};
    for (int64_t i = 0; i < n; ++i) o[i] = f(std::get<I>(in)[i]...);
    return;
  }
  bool scalar_inputs = s[0] == sizeof(Out) && ((s[I + 1] == 0) && ...);
  if (scalar_inputs) {
    Out v = f(*reinterpret_cast<const In*>(p[I + 1])...);
    for (int64_t i = 0; i < n; ++i) o[i] = v;
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    *reinterpret_cast<Out*>(p[0] + i * s[0]) =
        f(*reinterpret_cast<const In*>(p[I + 1] + i * s[I + 1])...);
  }
}
}  // namespace loops_detail

/// out[i] = f(in_0[i], ..., in_k[i]) over out's shape with broadcasting. Every
/// input must already have dtype In (callers convert first); out is contiguous.
template <class Out, class... In, class F>
void pointwise(const Tensor& out, const std::vector<Tensor>& inputs, const F& f) {
  constexpr size_t N = sizeof...(In);
  std::vector<char*> ptrs;
  std::vector<std::vector<int64_t>> strides;
  ptrs.push_back(static_cast<char*>(out.data_ptr()));
  strides.push_back(broadcast_byte_strides(out, out.sizes()));
  for (size_t k = 0; k < N; ++k) {
    ptrs.push_back(static_cast<char*>(inputs[k].data_ptr()));
    strides.push_back(broadcast_byte_strides(inputs[k], out.sizes()));
  }
  for_each_row(out.sizes(), std::move(ptrs), std::move(strides),
               [&f](char** p, const int64_t* s, int64_t n) {
                 loops_detail::run_row<Out, In...>(p, s, n, f, std::make_index_sequence<N>{});
               });
}

/// `s` converted to element type T by scalar::cast, the conversion every copy uses
/// (float -> integer as PyTorch on x86-64; float16/bfloat16 through float).
template <class T>
T scalar_to(const Scalar& s) {
  if (s.is_floating()) return scalar::cast<T>(s.to_double());
  if (s.is_bool()) return scalar::cast<T>(s.to_int() != 0);
  return scalar::cast<T>(s.to_int());
}

/// Strided, converting copy: dst[i] = (DstT)src[i] with src broadcast to dst's
/// shape; dst may be any strided view. Used by copy_, to(dtype), contiguous().
void copy_convert(const Tensor& dst, const Tensor& src);

}  // namespace smelt::cpu
