// The CPU's multi-tensor optimizer steps (optim.h). The elements of all the
// group's tensors are cut into chunks, and the chunks run in one OpenMP loop:
// one "kernel" for the whole group, as PyTorch's foreach path launches one per
// tensor list.
#include "backend/cpu/optim.h"

#include <algorithm>

#include "backend/cpu/loops.h"

namespace smelt::cpu {

namespace {

/// A run of elements [begin, end) of tensor `t`.
struct Chunk {
  size_t t;
  int64_t begin, end;
};

std::vector<Chunk> chunks_of(const std::vector<Tensor>& params) {
  constexpr int64_t kChunk = 16384;
  std::vector<Chunk> out;
  for (size_t t = 0; t < params.size(); ++t)
    for (int64_t b = 0, n = params[t].numel(); b < n; b += kChunk)
      out.push_back({t, b, std::min(n, b + kChunk)});
  return out;
}

/// Runs f.template operator()<T, C>(chunk) over every chunk in parallel, T the
/// tensors' element type and C its compute type.
template <class F>
void for_chunks(const std::vector<Tensor>& params, F f) {
  if (params.empty()) return;
  const std::vector<Chunk> chunks = chunks_of(params);
  int64_t total = 0;
  for (const auto& p : params) total += p.numel();
  const auto n = static_cast<int64_t>(chunks.size());
  auto run = [&](auto tag, auto ctag) {
    using T = decltype(tag);
    using C = decltype(ctag);
    parallel_for(0, n, grain_for(std::max<int64_t>(1, total / std::max<int64_t>(n, 1))),
                 [&](int64_t i0, int64_t i1) {
                   for (int64_t i = i0; i < i1; ++i) f.template operator()<T, C>(chunks[i]);
                 });
  };
  switch (params[0].dtype()) {
    case DType::Float16:
      return run(Half(), 0.0f);
    case DType::BFloat16:
      return run(BFloat16(), 0.0f);
    case DType::Float32:
      return run(0.0f, 0.0f);
    case DType::Float64:
      return run(0.0, 0.0);
    default:
      SMELT_INTERNAL_ASSERT(false, "optimizer step: non-floating dtype {}",
                            dtype_name(params[0].dtype()));
  }
}

template <class T>
T* ptr(const Tensor& t) {
  return static_cast<T*>(t.data_ptr());
}

/// SgdHyper with sgd()'s branches fixed at compile time: a loop over a chunk
/// then has none, and `omp simd` vectorizes it (GCC leaves a loop scalar when
/// it branches, even on a condition that does not change in the loop). The
/// lanes round each operation as the scalar code does, so the bits are the same.
template <bool Maximize, bool WeightDecay, bool Momentum, bool FirstStep, bool Nesterov>
struct FixedSgdHyper : optim_ops::SgdHyper {
  static constexpr bool maximize = Maximize, first_step = FirstStep, nesterov = Nesterov;
  static constexpr bool has_weight_decay() { return WeightDecay; }
  static constexpr bool has_momentum() { return Momentum; }
};

/// Calls f.template operator()<b>().
template <class F>
void with_bool(bool b, F&& f) {
  if (b)
    f.template operator()<true>();
  else
    f.template operator()<false>();
}

/// Calls f(FixedSgdHyper<...>{h}) for h's flags (those that matter: without
/// momentum, first_step and nesterov are false).
template <class F>
void with_fixed_sgd_hyper(const optim_ops::SgdHyper& h, F&& f) {
  with_bool(h.maximize, [&]<bool Mx>() {
    with_bool(h.has_weight_decay(), [&]<bool Wd>() {
      if (!h.has_momentum()) {
        FixedSgdHyper<Mx, Wd, false, false, false> fixed;
        static_cast<optim_ops::SgdHyper&>(fixed) = h;
        return f(fixed);
      }
      with_bool(h.first_step, [&]<bool First>() {
        with_bool(h.nesterov, [&]<bool Nest>() {
          FixedSgdHyper<Mx, Wd, true, First, Nest> fixed;
          static_cast<optim_ops::SgdHyper&>(fixed) = h;
          f(fixed);
        });
      });
    });
  });
}

}  // namespace

void sgd_step(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
              const std::vector<Tensor>& momentum_buffers, const optim_ops::SgdHyper& hyper) {
  with_fixed_sgd_hyper(hyper, [&](const auto& h) {
    for_chunks(params, [&]<class T, class C>(const Chunk& c) {
      T* p = ptr<T>(params[c.t]);
      const T* g = ptr<T>(grads[c.t]);
      T* buf = h.has_momentum() ? ptr<T>(momentum_buffers[c.t]) : nullptr;
#pragma omp simd
      for (int64_t e = c.begin; e < c.end; ++e) {
        C pv = static_cast<C>(p[e]);
        C bv = h.has_momentum() ? static_cast<C>(buf[e]) : C(0);
        optim_ops::sgd<C>(pv, static_cast<C>(g[e]), &bv, h);
        p[e] = static_cast<T>(pv);
        if (h.has_momentum()) buf[e] = static_cast<T>(bv);
      }
    });
  });
}

void adam_step(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
               const std::vector<Tensor>& exp_avgs, const std::vector<Tensor>& exp_avg_sqs,
               const std::vector<Tensor>& max_exp_avg_sqs,
               const std::vector<optim_ops::AdamHyper>& hyper) {
  const bool amsgrad = !max_exp_avg_sqs.empty();
  for_chunks(params, [&]<class T, class C>(const Chunk& c) {
    T* p = ptr<T>(params[c.t]);
    const T* g = ptr<T>(grads[c.t]);
    T* m = ptr<T>(exp_avgs[c.t]);
    T* v = ptr<T>(exp_avg_sqs[c.t]);
    T* vmax = amsgrad ? ptr<T>(max_exp_avg_sqs[c.t]) : nullptr;
    const optim_ops::AdamHyper& h = hyper[c.t];
    for (int64_t e = c.begin; e < c.end; ++e) {
      C pv = static_cast<C>(p[e]), mv = static_cast<C>(m[e]), vv = static_cast<C>(v[e]);
      C xv = amsgrad ? static_cast<C>(vmax[e]) : C(0);
      optim_ops::adam<C>(pv, static_cast<C>(g[e]), mv, vv, &xv, h);
      p[e] = static_cast<T>(pv);
      m[e] = static_cast<T>(mv);
      v[e] = static_cast<T>(vv);
      if (amsgrad) vmax[e] = static_cast<T>(xv);
    }
  });
}

}  // namespace smelt::cpu
