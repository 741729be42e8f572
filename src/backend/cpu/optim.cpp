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

}  // namespace

void sgd_step(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
              const std::vector<Tensor>& momentum_buffers, const optim_ops::SgdHyper& hyper) {
  const bool momentum = hyper.momentum != 0;
  for_chunks(params, [&]<class T, class C>(const Chunk& c) {
    T* p = ptr<T>(params[c.t]);
    const T* g = ptr<T>(grads[c.t]);
    T* buf = momentum ? ptr<T>(momentum_buffers[c.t]) : nullptr;
    for (int64_t e = c.begin; e < c.end; ++e) {
      C pv = static_cast<C>(p[e]);
      C bv = momentum ? static_cast<C>(buf[e]) : C(0);
      optim_ops::sgd<C>(pv, static_cast<C>(g[e]), &bv, hyper);
      p[e] = static_cast<T>(pv);
      if (momentum) buf[e] = static_cast<T>(bv);
    }
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
