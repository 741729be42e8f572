// Fused eager CPU kernels of softmax, log_softmax and layer_norm over
// contiguous rows (see norm_kernels.h). Built once per CPU capability.
#include "backend/cpu/norm_kernels.h"

#include <type_traits>
#include <vector>

#include "backend/cpu/divide_run.h"
#include "backend/cpu/loops.h"
#include "backend/cpu/unary_runs.h"
#include "kernels/reduce_ops.h"
#include "kernels/scalar_ops.h"

namespace smelt::cpu::SMELT_CPU_CAP {

namespace {

namespace r = ::smelt::reduce;

/// This copy's tag for reduce::ContiguousRun (an instantiation of its own).
struct RunTag {};

/// parallel_for's grain for rows of n elements that softmax or layer_norm
/// normalizes: ATen's softmax rule (SoftMaxKernel.cpp), a grain of
/// GRAIN_SIZE / (16 n) rows, 16 standing for the operations per element
/// (a max, an exp, a sum and a division; Welford's update and the affine
/// map). With grain_for(n), 4096 rows of 64 floats went to 8 threads of 16:
/// layer_norm took 2.0x, softmax 1.8x PyTorch's time at 16 threads on the
/// H200 host's Xeon (256 rows of 256: softmax 3.2x).
inline int64_t row_grain(int64_t n) { return grain_for(16 * n); }

/// y[k] = exp(x[k] - m) for k < n, each op rounded in T.
template <class T>
void exp_shifted(T* __restrict y, const T* __restrict x, T m, int64_t n) {
  if constexpr (std::is_same_v<T, float>) {
    exp_shifted_run(y, x, m, n);
  } else {
    for (int64_t k = 0; k < n; ++k) y[k] = scalar::exp<T>(scalar::sub<T>(x[k], m));
  }
}

template <class T>
void softmax_typed(const Tensor& x, bool log, const Tensor& out) {
  const int64_t n = x.sizes().back();
  const int64_t rows = x.numel() / n;
  const T* xp = static_cast<const T*>(x.data_ptr());
  T* yp = static_cast<T*>(out.data_ptr());
  using MaxA = r::accumulate_t<r::AccRule::Compare, T>;
  using SumA = r::accumulate_t<r::AccRule::Sum, T>;
  static_assert(std::is_same_v<MaxA, T> && std::is_same_v<SumA, T>);
  parallel_for(0, rows, row_grain(n), [&](int64_t r0, int64_t r1) {
    // log_softmax's exp(x - max) of a row, summed as a contiguous run: the
    // same InnerOrder (lanes, chunks, cascade) as summing them as they come.
    std::vector<T> e(log ? static_cast<size_t>(n) : 0);
    for (int64_t row = r0; row < r1; ++row) {
      const T* __restrict xr = xp + row * n;
      T* __restrict yr = yp + row * n;
      // amax(x, dim, keepdim)
      const T m = r::fold_contiguous_row<r::Max<T>>(n, r::ContiguousRun<T, RunTag>{xr});
      if (log) {
        // shifted - log(sum(exp(shifted))), shifted = x - max
        T* __restrict er = e.data();
        exp_shifted(er, xr, m, n);
        const T s = r::fold_contiguous_row<r::Sum<SumA>>(n, r::ContiguousRun<T, RunTag>{er});
        const T ls = scalar::log<T>(s);
        for (int64_t k = 0; k < n; ++k) yr[k] = scalar::sub<T>(scalar::sub<T>(xr[k], m), ls);
      } else {
        // e / sum(e), e = exp(x - max)
        exp_shifted(yr, xr, m, n);
        const T s = r::fold_contiguous_row<r::Sum<T>>(n, r::ContiguousRun<T, RunTag>{yr});
        if constexpr (std::is_same_v<T, float>) {
          divide_run(yr, n, s);  // scalar::div's bits
        } else {
          for (int64_t k = 0; k < n; ++k) yr[k] = scalar::div<T>(yr[k], s);
        }
      }
    }
  });
}

void softmax_rows(const Tensor& x, bool log, const Tensor& out) {
  if (x.dtype() == DType::Float64) {
    softmax_typed<double>(x, log, out);
  } else {
    softmax_typed<float>(x, log, out);
  }
}

/// y[k] = (x[k] - mean) * rstd [* w] [+ b] over a run of n elements, each op
/// rounded in T in the decompositions' order: the normalization of
/// layer_norm (kPerElement: weight and bias w[k], b[k]) and of batch_norm
/// (one channel's w[0], b[0]). w, b may be null.
template <bool kPerElement, class T>
void normalize_run(const T* __restrict xr, T* __restrict yr, int64_t n, T mean, T rstd, const T* w,
                   const T* b) {
  auto at = [](const T* p, int64_t k) { return kPerElement ? p[k] : p[0]; };
  if (w && b) {
    for (int64_t k = 0; k < n; ++k)
      yr[k] = scalar::add<T>(
          scalar::mul<T>(scalar::mul<T>(scalar::sub<T>(xr[k], mean), rstd), at(w, k)), at(b, k));
  } else if (w) {
    for (int64_t k = 0; k < n; ++k)
      yr[k] = scalar::mul<T>(scalar::mul<T>(scalar::sub<T>(xr[k], mean), rstd), at(w, k));
  } else if (b) {
    for (int64_t k = 0; k < n; ++k)
      yr[k] = scalar::add<T>(scalar::mul<T>(scalar::sub<T>(xr[k], mean), rstd), at(b, k));
  } else {
    for (int64_t k = 0; k < n; ++k) yr[k] = scalar::mul<T>(scalar::sub<T>(xr[k], mean), rstd);
  }
}

template <class T>
void layer_norm_typed(const Tensor& x, int64_t n, const Tensor& weight, const Tensor& bias,
                      double eps, const Tensor& out) {
  const int64_t rows = x.numel() / n;
  const T* xp = static_cast<const T*>(x.data_ptr());
  T* yp = static_cast<T*>(out.data_ptr());
  const T* w = weight.defined() ? static_cast<const T*>(weight.data_ptr()) : nullptr;
  const T* b = bias.defined() ? static_cast<const T*>(bias.data_ptr()) : nullptr;
  using W = r::Welford<r::accumulate_t<r::AccRule::Welford, T>>;
  const T eps_t = scalar_to<T>(Scalar(eps));
  parallel_for(0, rows, row_grain(n), [&](int64_t r0, int64_t r1) {
    for (int64_t row = r0; row < r1; ++row) {
      const T* __restrict xr = xp + row * n;
      T* __restrict yr = yp + row * n;
      // var_mean(x, dims, correction=0, keepdim), each rounded to T as stored
      // (float elements as they are: reduce::welford_lanes folds them in float lanes)
      const typename W::acc_t acc = r::fold_contiguous_row<W>(n, r::ContiguousRun<T, RunTag>{xr});
      const T mean = static_cast<T>(W::mean(acc));
      const T rstd = scalar::rsqrt<T>(scalar::add<T>(static_cast<T>(W::var(acc, 0.0)), eps_t));
      normalize_run<true>(xr, yr, n, mean, rstd, w, b);
    }
  });
}

void layer_norm_rows(const Tensor& x, int64_t n, const Tensor& weight, const Tensor& bias,
                     double eps, const Tensor& out) {
  if (x.dtype() == DType::Float64) {
    layer_norm_typed<double>(x, n, weight, bias, eps, out);
  } else {
    layer_norm_typed<float>(x, n, weight, bias, eps, out);
  }
}

template <class T>
void batch_norm_apply_typed(const Tensor& x, const Tensor& mean, const Tensor& var,
                            const Tensor& weight, const Tensor& bias, double eps,
                            const Tensor& out) {
  const int64_t channels = x.size(1), planes = x.size(0) * channels;
  const int64_t hw = planes > 0 ? x.numel() / planes : 0;
  const T* xp = static_cast<const T*>(x.data_ptr());
  T* yp = static_cast<T*>(out.data_ptr());
  const T* m = static_cast<const T*>(mean.data_ptr());
  const T* v = static_cast<const T*>(var.data_ptr());
  const T* w = weight.defined() ? static_cast<const T*>(weight.data_ptr()) : nullptr;
  const T* b = bias.defined() ? static_cast<const T*>(bias.data_ptr()) : nullptr;
  const T eps_t = scalar_to<T>(Scalar(eps));  // the wrapped number, converted as add() does
  parallel_for(0, planes, grain_for(hw), [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      const int64_t c = p % channels;
      const T rstd = scalar::rsqrt<T>(scalar::add<T>(v[c], eps_t));
      normalize_run<false>(xp + p * hw, yp + p * hw, hw, m[c], rstd, w ? w + c : nullptr,
                           b ? b + c : nullptr);
    }
  });
}

void batch_norm_apply(const Tensor& x, const Tensor& mean, const Tensor& var, const Tensor& weight,
                      const Tensor& bias, double eps, const Tensor& out) {
  if (x.dtype() == DType::Float64) {
    batch_norm_apply_typed<double>(x, mean, var, weight, bias, eps, out);
  } else {
    batch_norm_apply_typed<float>(x, mean, var, weight, bias, eps, out);
  }
}

}  // namespace

}  // namespace smelt::cpu::SMELT_CPU_CAP

SMELT_REGISTER_DISPATCH(softmax_rows_stub, &::smelt::cpu::SMELT_CPU_CAP::softmax_rows);
SMELT_REGISTER_DISPATCH(layer_norm_rows_stub, &::smelt::cpu::SMELT_CPU_CAP::layer_norm_rows);
SMELT_REGISTER_DISPATCH(batch_norm_apply_stub, &::smelt::cpu::SMELT_CPU_CAP::batch_norm_apply);
