// The CPU backend: backend.h's interface over the CPU code of this folder
// (loops.h, reduce.h, blas.h, pointwise_table.h, fill.h, index.h, toolchain.h),
// registered for DeviceType::CPU at load time. Memory comes from the caching
// host allocator (allocator.h); there is one implicit stream (work runs to completion on the
// calling thread), so streams and events are no-ops.
#include <fmt/format.h>

#include <omp.h>

#include <cstdlib>
#include <cstring>

#include "backend/attention.h"
#include "backend/backend.h"
#include "backend/cpu/allocator.h"
#include "backend/cpu/attention.h"
#include "backend/cpu/blas.h"
#include "backend/cpu/copy.h"
#include "backend/cpu/fill.h"
#include "backend/cpu/index.h"
#include "backend/cpu/loops.h"
#include "backend/cpu/norm_kernels.h"
#include "backend/cpu/optim.h"
#include "backend/cpu/pointwise_table.h"
#include "backend/cpu/reduce.h"
#include "backend/cpu/toolchain.h"
#include "core/tensor_impl.h"
#include "kernels/reduce_ops.h"

namespace smelt::cpu {

namespace {

/// True when the fused row kernels (norm_kernels.h) give the decomposition's
/// values for rows of n elements of x: float32 / float64, contiguous, and
/// rows the decomposition's reductions combine in one stretch each
/// (reduce::row_splits, which cuts the rows of few-row reductions across
/// threads).
bool fused_rows_ok(const Tensor& x, int64_t n, const Tensor& out) {
  const DType t = x.dtype();
  if ((t != DType::Float32 && t != DType::Float64) || n <= 0 || x.numel() == 0) return false;
  if (!x.is_contiguous() || !out.is_contiguous() || out.dtype() != t || out.sizes() != x.sizes())
    return false;
  return reduce::row_splits(x.numel() / n, n, omp_get_max_threads()) == 1;
}

/// weight / bias of fused_layer_norm (per-channel parameters of
/// fused_batch_norm_apply): absent, or contiguous [n] of dtype t.
bool row_param_ok(const Tensor& p, int64_t n, DType t) {
  return !p.defined() || (p.dtype() == t && p.is_contiguous() && p.numel() == n);
}

class CpuBackend final : public backend::Backend {
 public:
  using Stream = backend::Stream;
  using Event = backend::Event;

  DeviceType type() const override { return DeviceType::CPU; }
  const char* name() const override { return "cpu"; }

  int device_count() override { return 1; }

  Allocator& allocator() override { return allocator_; }
  backend::MemoryStats memory_stats(Device) override { return allocator_.stats(); }
  void reset_peak_memory_stats(Device) override { allocator_.reset_peaks(); }
  void empty_cache() override { allocator_.empty_cache(); }
  void memset(void* dst, int value, size_t nbytes, Stream) override {
    std::memset(dst, value, nbytes);
  }
  void copy_on_device(void* dst, const void* src, size_t nbytes, Stream) override {
    std::memmove(dst, src, nbytes);
  }
  void copy_to_host(void* dst, const void* src, size_t nbytes, Stream) override {
    std::memcpy(dst, src, nbytes);
  }
  void copy_from_host(void* dst, const void* src, size_t nbytes, Stream) override {
    std::memcpy(dst, src, nbytes);
  }

  Stream current_stream(Device) override { return {}; }
  Event record_event(Stream) override { return {}; }
  void wait_event(Stream, Event) override {}
  void synchronize(Stream) override {}

  std::shared_ptr<backend::Module> build(const std::string& source, backend::ModuleCache& cache,
                                         backend::BuildInfo* info) override {
    return build_module(source, cache, info);
  }
  void launch(backend::KernelHandle kernel, void* const* args, const backend::LaunchConfig&,
              Stream) override {
    reinterpret_cast<void (*)(void* const*)>(const_cast<void*>(kernel.fn))(args);
  }

  bool gemm_epilogue_supported(const backend::GemmActivation& act) const override {
    return gemm_epilogue_activation_supported(act);
  }
  void gemm(const backend::Gemm& g, Stream) override {
    SMELT_INTERNAL_ASSERT(g.c_dtype() == g.dtype,
                          "gemm: the CPU backend writes C in the operands' dtype ({}), not {}",
                          dtype_name(g.dtype), dtype_name(g.c_dtype()));
    gemm_fused(g.dtype, g.batch, g.m, g.n, g.k, g.a, g.b, g.c, g.c_batch_stride, g.c_row_stride,
               g.c_col_stride, g.epilogue, g.alpha, g.b_identity);
  }

  void copy(const Tensor& dst, const Tensor& src) override { copy_convert(dst, src); }
  void fill(const Tensor& dst, const Scalar& v) override { cpu::fill(dst, v); }
  void arange(const Tensor& out, const Scalar& start, const Scalar& step) override {
    cpu::arange(out, start, step);
  }
  void linspace(const Tensor& out, double start, double end) override {
    cpu::linspace(out, start, end);
  }
  void random(const Tensor& out, const backend::RandomFill& fill) override {
    random_fill(out, fill);
  }

  bool has_pointwise(const std::string& functor, DType compute) const override {
    const pw::PointwiseKernel* k = pw::find_pointwise(functor);
    return k != nullptr && pw::in_set(k->set, compute);
  }
  void pointwise(const std::string& functor, const std::vector<Scalar>& extra, DType compute,
                 const Tensor& out, const std::vector<Tensor>& inputs) override {
    const pw::PointwiseKernel* k = pw::find_pointwise(functor);
    SMELT_INTERNAL_ASSERT(k != nullptr && static_cast<int>(inputs.size()) == k->arity &&
                              static_cast<int>(extra.size()) == k->n_extra,
                          "pointwise: no CPU kernel {} for {} inputs and {} extra arguments",
                          functor, inputs.size(), extra.size());
    k->run(compute, out, inputs, extra);
  }

  void reduce(backend::ReduceOp op, const Tensor& x, const std::vector<int64_t>& dims,
              const Tensor& out) override {
    using R = backend::ReduceOp;
    switch (op) {
      case R::Sum:
        return sum_kernel(x, dims, out);
      case R::Prod:
        return prod_kernel(x, dims, out);
      case R::Mean:
        return mean_kernel(x, dims, out);
      case R::Max:
      case R::Min:
        return minmax_kernel(x, dims, out, op == R::Max);
      case R::Any:
      case R::All:
        return anyall_kernel(x, dims, out, op == R::Any);
    }
  }
  void arg_reduce(const Tensor& x, const std::vector<int64_t>& dims, const Tensor& values,
                  const Tensor& indices, bool is_max) override {
    arg_kernel(x, dims, values, indices, is_max);
  }
  void var(const Tensor& x, const std::vector<int64_t>& dims, double correction, bool take_sqrt,
           const Tensor& var, const Tensor& mean) override {
    var_kernel(x, dims, correction, take_sqrt, var, mean);
  }
  void cumsum(const Tensor& x, int64_t dim, const Tensor& out) override {
    cumsum_kernel(x, dim, out);
  }

  bool cat(const Tensor& out, const std::vector<Tensor>& inputs, int64_t dim) override {
    return cat_contiguous(out, inputs, dim);
  }
  bool fused_softmax(const Tensor& x, bool log, const Tensor& out) override {
    if (x.dim() == 0 || !fused_rows_ok(x, x.sizes().back(), out)) return false;
    softmax_rows_stub(x, log, out);
    return true;
  }
  bool fused_layer_norm(const Tensor& x, int64_t n, const Tensor& weight, const Tensor& bias,
                        double eps, const Tensor& out) override {
    if (!fused_rows_ok(x, n, out) || x.numel() % n != 0 || !row_param_ok(weight, n, x.dtype()) ||
        !row_param_ok(bias, n, x.dtype()))
      return false;
    layer_norm_rows_stub(x, n, weight, bias, eps, out);
    return true;
  }
  bool fused_batch_norm_apply(const Tensor& x, const Tensor& mean, const Tensor& var,
                              const Tensor& weight, const Tensor& bias, double eps,
                              const Tensor& out) override {
    const DType t = x.dtype();
    if ((t != DType::Float32 && t != DType::Float64) || x.dim() < 3 || !x.is_contiguous() ||
        !out.is_contiguous() || out.dtype() != t || out.sizes() != x.sizes())
      return false;
    const int64_t channels = x.size(1);
    if (!row_param_ok(mean, channels, t) || !row_param_ok(var, channels, t) || !mean.defined() ||
        !var.defined() || !row_param_ok(weight, channels, t) || !row_param_ok(bias, channels, t))
      return false;
    batch_norm_apply_stub(x, mean, var, weight, bias, eps, out);
    return true;
  }

  /// attention.h's kernel: float32, head dims up to kMaxAttentionHeadDim,
  /// keys times (E + Ev) up to kMaxAttentionPack (64 MiB per thread).
  static constexpr int64_t kMaxAttentionHeadDim = 512;
  static constexpr int64_t kMaxAttentionPack = int64_t{16} << 20;
  bool has_fused_attention(DType dtype, int64_t head_dim, bool /*masked*/) const override {
    return dtype == DType::Float32 && head_dim >= 1 && head_dim <= kMaxAttentionHeadDim;
  }
  bool fused_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& attn_mask,
                       bool is_causal, double scale, const Tensor& out) override {
    if (q.dim() != 4 || k.dim() != 4 || v.dim() != 4 || out.dim() != 4) return false;
    const int64_t B = q.size(0), H = q.size(1), L = q.size(2), E = q.size(3), S = k.size(2),
                  Ev = v.size(3);
    // (E == 0: the decomposition, whose scores are zeros whatever the scale)
    if (!has_fused_attention(q.dtype(), E, attn_mask.defined()) || B == 0 || H == 0 || L == 0 ||
        S == 0 || E == 0 || Ev == 0)
      return false;
    // Each thread packs one head's k^T and v: at most kMaxAttentionPack floats.
    if ((E + Ev) * S > kMaxAttentionPack) return false;
    const Tensor* ts[4] = {&q, &k, &v, &out};
    const Shape want[4] = {{B, H, L, E}, {B, H, S, E}, {B, H, S, Ev}, {B, H, L, Ev}};
    for (int t = 0; t < 4; ++t)  // no broadcasting; the last dim contiguous
      if (ts[t]->dtype() != DType::Float32 || ts[t]->sizes() != want[t] || ts[t]->stride(3) != 1)
        return false;
    AttentionCall c;
    if (attn_mask.defined() && (!backend::attention_mask_view(attn_mask, q, S, c.mask) ||
                                (c.mask.dtype != DType::Bool && c.mask.dtype != DType::Float32)))
      return false;
    int64_t* strides[4] = {c.q_stride, c.k_stride, c.v_stride, c.o_stride};
    for (int t = 0; t < 4; ++t)
      for (int d = 0; d < 3; ++d) strides[t][d] = ts[t]->stride(d);
    c.q = static_cast<const float*>(q.data_ptr());
    c.k = static_cast<const float*>(k.data_ptr());
    c.v = static_cast<const float*>(v.data_ptr());
    c.out = static_cast<float*>(out.data_ptr());
    c.batch = B;
    c.heads = H;
    c.L = L;
    c.S = S;
    c.E = E;
    c.Ev = Ev;
    c.scale = static_cast<float>(scale);
    c.causal = is_causal;
    attention_stub(c);
    return true;
  }

  void index_select(const Tensor& out, const Tensor& x, int64_t dim, const Tensor& index) override {
    cpu::index_select(out, x, dim, index);
  }
  void gather(const Tensor& out, const Tensor& x, int64_t dim, const Tensor& index) override {
    cpu::gather(out, x, dim, index);
  }
  void scatter_add(const Tensor& out, int64_t dim, const Tensor& index,
                   const Tensor& src) override {
    cpu::scatter_add(out, dim, index, src);
  }
  void index_copy(const Tensor& out, const Tensor& index, const Tensor& src) override {
    cpu::index_copy(out, index, src);
  }
  void triangle_zero(const Tensor& out, int64_t diagonal, bool lower) override {
    cpu::triangle_zero(out, diagonal, lower);
  }

  void sgd_step(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                const std::vector<Tensor>& momentum_buffers,
                const optim_ops::SgdHyper& hyper) override {
    cpu::sgd_step(params, grads, momentum_buffers, hyper);
  }
  void adam_step(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                 const std::vector<Tensor>& exp_avgs, const std::vector<Tensor>& exp_avg_sqs,
                 const std::vector<Tensor>& max_exp_avg_sqs,
                 const std::vector<optim_ops::AdamHyper>& hyper) override {
    cpu::adam_step(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, hyper);
  }

 private:
  HostCachingAllocator allocator_;  // its cap: SMELT_CPU_CACHE_BYTES
};

/// Registered before main() (all of smelt's objects are linked, see CMakeLists.txt).
const bool kRegistered = [] {
  static CpuBackend* cpu = new CpuBackend;  // never destroyed: storages may outlive main()
  backend::register_backend(cpu);
  return true;
}();

}  // namespace

}  // namespace smelt::cpu
