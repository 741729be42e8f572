// The CUDA backend (namespace smelt::cuda::impl; smelt::cuda is the public API
// of smelt/cuda.h): backend.h's interface over the CUDA code of this folder
// (device.h, allocator.h, kernels.h, reduce.h, blas.h), registered for
// DeviceType::CUDA at load time. Registering touches no driver: on a machine
// without a GPU, device_count() is 0 and any use of a CUDA tensor raises
// "no CUDA device".
//
// Work is queued on the calling thread's current stream of the tensors'
// device (the legacy default stream unless set); launches are asynchronous
// and the host waits only where a value reaches it (copy_to_host: item(),
// to_vector(), printing, copies to the CPU) or where asked to. Checks that
// need values (an integer division by zero) are made by the kernels, which
// set a device error flag (error_flag.h) that every synchronization raises.
// Generated code (smelt::compile) is built by NVRTC and launched through the
// driver API (toolchain.h); compiled graphs in mode reduce-overhead are
// recorded as CUDA graphs (graphs.h), during which the calls that wait for
// the device or read host memory raise instead of being recorded.
#include <fmt/format.h>

#include <cstring>

#include "backend/attention.h"
#include "backend/backend.h"
#include "backend/cuda/allocator.h"
#include "backend/cuda/blas.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cudnn_attention.h"
#include "backend/cuda/device.h"
#include "backend/cuda/error_flag.h"
#include "backend/cuda/graphs.h"
#include "backend/cuda/host_allocator.h"
#include "backend/cuda/kernels.h"
#include "backend/cuda/optim.h"
#include "backend/cuda/pointwise.h"
#include "backend/cuda/reduce.h"
#include "backend/cuda/tensor_args.h"
#include "backend/cuda/toolchain.h"
#include "core/tensor_impl.h"

namespace smelt::cuda::impl {

namespace {

cudaStream_t stream_of(backend::Stream s) { return static_cast<cudaStream_t>(s.handle); }
cudaEvent_t event_of(backend::Event e) { return static_cast<cudaEvent_t>(e.handle); }

/// The stream kernels on `t`'s device are queued on.
cudaStream_t stream_for(const Tensor& t) { return current_stream(t.device().index); }

/// The device whose memory `p` is (the current device for host memory).
int device_of(const void* p) {
  cudaPointerAttributes attr{};
  SMELT_CUDA_CHECK(cudaPointerGetAttributes(&attr, p));
  int dev = attr.device;
  if (attr.type != cudaMemoryTypeDevice) SMELT_CUDA_CHECK(cudaGetDevice(&dev));
  return dev;
}

/// A host value of `v` as scalar_to converts it (floating -> double,
/// bool -> bool, else int64).
HostValue scalar_value(const Scalar& v) {
  if (v.is_floating()) {
    const double d = v.to_double();
    return HostValue::of(DType::Float64, &d, sizeof d);
  }
  if (v.is_bool()) {
    const bool b = v.to_int() != 0;
    return HostValue::of(DType::Bool, &b, sizeof b);
  }
  const int64_t i = v.to_int();
  return HostValue::of(DType::Int64, &i, sizeof i);
}

bool zero_bits(const Scalar& v) {
  return v.is_floating() ? v.to_double() == 0.0 && !std::signbit(v.to_double()) : v.to_int() == 0;
}

/// An int64 contiguous copy of an index tensor on its device (no copy when it is one).
Tensor int64_index(const Tensor& index) {
  if (index.dtype() == DType::Int64 && index.is_contiguous()) return index;
  Tensor c = detail::make_empty(index.sizes(), DType::Int64, index.device());
  PointwiseArgs a;
  make_elementwise(c, {index}, a);
  a.compute = DType::Int64;
  a.device = index.device().index;
  a.stream = stream_for(index);
  launch_copy(a);
  return c;
}

/// Sets `a`'s mask fields from attn_mask as [B, H, L, S] (q's B, H, L; S
/// keys): broadcast dims read with stride 0. false for a mask that does not
/// broadcast there, lives elsewhere, or has a dtype the kernel does not read.
bool attention_mask_args(const Tensor& mask, const Tensor& q, int64_t S, AttentionArgs& a) {
  backend::AttentionMaskView view;
  if (!backend::attention_mask_view(mask, q, S, view)) return false;
  switch (view.dtype) {
    case DType::Bool:
      a.mask_kind = AttentionMask::Bool;
      break;
    case DType::Float16:
      a.mask_kind = AttentionMask::Float16;
      break;
    case DType::BFloat16:
      a.mask_kind = AttentionMask::BFloat16;
      break;
    case DType::Float32:
      a.mask_kind = AttentionMask::Float32;
      break;
    default:
      return false;
  }
  for (int d = 0; d < 4; ++d) a.mask_stride[d] = view.stride[d];
  a.mask = view.data;
  a.mask_itemsize = static_cast<int64_t>(itemsize(view.dtype));
  return true;
}

class CudaBackend final : public backend::Backend {
 public:
  using Stream = backend::Stream;
  using Event = backend::Event;

  DeviceType type() const override { return DeviceType::CUDA; }
  const char* name() const override { return "cuda"; }

  // ---- devices ----
  int device_count() override { return impl::device_count(); }
  int current_device() override { return impl::current_device(); }
  void set_device(int index) override { impl::set_device(index); }
  std::string device_name(Device device) override {
    require_device(device, "device_name");
    const cudaDeviceProp& p = properties(device.index);
    return fmt::format("{}, compute capability {}.{}", p.name, p.major, p.minor);
  }

  // ---- memory ----
  Allocator& allocator() override { return allocator_; }
  backend::MemoryStats memory_stats(Device device) override {
    return allocator_.stats(device.index);
  }
  void reset_peak_memory_stats(Device device) override { allocator_.reset_peak(device.index); }
  void empty_cache() override {
    allocator_.empty_cache();
    host_allocator_.empty_cache();
  }

  void memset(void* dst, int value, size_t nbytes, Stream stream) override {
    SMELT_CUDA_CHECK(cudaMemsetAsync(dst, value, nbytes, stream_of(stream)));
  }
  void copy_on_device(void* dst, const void* src, size_t nbytes, Stream stream) override {
    const char* s = static_cast<const char*>(src);
    char* d = static_cast<char*>(dst);
    if (d < s + nbytes && s < d + nbytes && d != s) {  // overlapping: through a scratch buffer
      void* tmp = allocator_.allocate(nbytes, Device(DeviceType::CUDA, current_device()));
      SMELT_CUDA_CHECK(
          cudaMemcpyAsync(tmp, src, nbytes, cudaMemcpyDeviceToDevice, stream_of(stream)));
      SMELT_CUDA_CHECK(
          cudaMemcpyAsync(dst, tmp, nbytes, cudaMemcpyDeviceToDevice, stream_of(stream)));
      allocator_.deallocate(tmp, Device(DeviceType::CUDA, current_device()));
      return;
    }
    SMELT_CUDA_CHECK(
        cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDeviceToDevice, stream_of(stream)));
  }
  void copy_to_host(void* dst, const void* src, size_t nbytes, Stream stream) override {
    check_not_capturing("a copy to the host (a read of device values: item(), printing...)");
    SMELT_CUDA_CHECK(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDeviceToHost, stream_of(stream)));
    SMELT_CUDA_CHECK(cudaStreamSynchronize(stream_of(stream)));
    raise_device_errors();
  }
  void copy_from_host(void* dst, const void* src, size_t nbytes, Stream stream) override {
    check_not_capturing("a copy from pageable host memory");
    // From pageable memory the call returns once `src` has been staged (the
    // ops send pinned memory through copy_from_pinned_async).
    SMELT_CUDA_CHECK(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyHostToDevice, stream_of(stream)));
  }

  // ---- pinned host memory, record_stream ----
  Allocator* pinned_allocator() override { return &host_allocator_; }
  void copy_from_pinned_async(void* dst, const void* src, size_t nbytes, Stream stream) override {
    check_not_capturing("a copy from pinned host memory");
    const int dev = device_of(dst);
    DeviceGuard guard(dev);
    SMELT_CUDA_CHECK(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyHostToDevice, stream_of(stream)));
    host_allocator_.record_use(src, dev, stream_of(stream));
  }
  void copy_to_pinned_async(void* dst, const void* src, size_t nbytes, Stream stream) override {
    check_not_capturing("a copy to pinned host memory");
    const int dev = device_of(src);
    DeviceGuard guard(dev);
    SMELT_CUDA_CHECK(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDeviceToHost, stream_of(stream)));
    host_allocator_.record_use(dst, dev, stream_of(stream));
  }
  void record_stream(void* p, Device, Stream stream) override {
    allocator_.record_stream(p, stream_of(stream));
  }

  // ---- streams and events ----
  Stream current_stream(Device device) override { return {impl::current_stream(device.index)}; }
  void set_current_stream(Device device, Stream stream) override {
    impl::set_current_stream(device.index, stream_of(stream));
  }
  Stream create_stream(Device device) override {
    require_device(device, "Stream");
    DeviceGuard guard(device.index);
    cudaStream_t s = nullptr;
    SMELT_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    return {s};
  }
  void destroy_stream(Stream stream) override {
    if (stream.handle) SMELT_CUDA_CHECK(cudaStreamDestroy(stream_of(stream)));
  }
  Event record_event(Stream stream) override {
    Event e = create_event(false);
    record(e, stream);
    return e;
  }
  Event create_event(bool enable_timing) override {
    cudaEvent_t e = nullptr;
    SMELT_CUDA_CHECK(
        cudaEventCreateWithFlags(&e, enable_timing ? cudaEventDefault : cudaEventDisableTiming));
    return {e};
  }
  void destroy_event(Event event) override {
    if (event.handle) SMELT_CUDA_CHECK(cudaEventDestroy(event_of(event)));
  }
  void record(Event event, Stream stream) override {
    SMELT_CUDA_CHECK(cudaEventRecord(event_of(event), stream_of(stream)));
  }
  void event_synchronize(Event event) override {
    check_not_capturing("waiting for an event");
    SMELT_CUDA_CHECK(cudaEventSynchronize(event_of(event)));
    raise_device_errors();
  }
  bool event_query(Event event) override {
    const cudaError_t err = cudaEventQuery(event_of(event));
    if (err == cudaErrorNotReady) {
      (void)cudaGetLastError();
      return false;
    }
    SMELT_CUDA_CHECK(err);
    return true;
  }
  float elapsed_ms(Event start, Event end) override {
    float ms = 0;
    SMELT_CUDA_CHECK(cudaEventElapsedTime(&ms, event_of(start), event_of(end)));
    return ms;
  }
  void wait_event(Stream stream, Event event) override {
    SMELT_CUDA_CHECK(cudaStreamWaitEvent(stream_of(stream), event_of(event), 0));
  }
  void synchronize(Stream stream) override {
    check_not_capturing("waiting for a stream");
    SMELT_CUDA_CHECK(cudaStreamSynchronize(stream_of(stream)));
    raise_device_errors();
  }
  void synchronize_device(Device device) override {
    require_device(device, "synchronize");
    check_not_capturing("waiting for the device");
    DeviceGuard guard(device.index);
    SMELT_CUDA_CHECK(cudaDeviceSynchronize());
    raise_device_errors();
  }

  // ---- toolchain and launch ----
  std::shared_ptr<backend::Module> build(const std::string& source, backend::ModuleCache& cache,
                                         backend::BuildInfo* info) override {
    return impl::build_module(source, cache, info);
  }
  void launch(backend::KernelHandle kernel, void* const* args, const backend::LaunchConfig& config,
              Stream stream) override {
    launch_kernel(kernel, args, config, stream_of(stream));
  }

  int* deferred_error_flag(std::vector<std::string> messages) override {
    return arm_error_slot(std::move(messages));
  }

  // ---- graph capture ----
  std::unique_ptr<backend::Capture> begin_capture(Device device) override {
    require_device(device, "CUDA graph");
    return impl::begin_capture(allocator_, device.index);
  }

  // ---- GEMM ----
  bool gemm_epilogue_supported(const backend::GemmActivation& act) const override {
    return impl::gemm_epilogue_supported(act);
  }
  void gemm(const backend::Gemm& g, Stream stream) override {
    impl::gemm(g, g.device.index, stream_of(stream));
  }
  int gemm_algorithm_count(const backend::Gemm& g, int most) override {
    return impl::gemm_candidate_count(g, most);
  }
  bool gemm_algorithms_tunable() const override { return true; }

  // ---- eager kernels ----
  void copy(const Tensor& dst, const Tensor& src) override {
    if (dst.numel() == 0) return;
    DeviceGuard guard(dst.device().index);
    const cudaStream_t s = stream_for(dst);
    if (src.device().is_cuda() && src.dtype() == dst.dtype() && src.sizes() == dst.sizes() &&
        src.is_contiguous() && dst.is_contiguous()) {
      SMELT_CUDA_CHECK(cudaMemcpyAsync(dst.data_ptr(), src.data_ptr(),
                                       static_cast<size_t>(dst.numel()) * dst.element_size(),
                                       cudaMemcpyDeviceToDevice, s));
      return;
    }
    SMELT_INTERNAL_ASSERT(src.device().is_cuda() || src.dim() == 0,
                          "CUDA copy: a CPU source must be 0-dim (copies between devices go "
                          "through Tensor::to)");
    PointwiseArgs a;
    make_elementwise(dst, {src}, a);
    a.compute = dst.dtype();
    a.device = dst.device().index;
    a.stream = s;
    launch_copy(a);
  }
  void fill(const Tensor& dst, const Scalar& v) override {
    if (dst.numel() == 0) return;
    DeviceGuard guard(dst.device().index);
    const cudaStream_t s = stream_for(dst);
    if (dst.is_contiguous() && zero_bits(v)) {
      SMELT_CUDA_CHECK(cudaMemsetAsync(dst.data_ptr(), 0,
                                       static_cast<size_t>(dst.numel()) * dst.element_size(), s));
      return;
    }
    PointwiseArgs a;
    make_elementwise(dst, {}, a);
    launch_fill(a.geom, a.out, scalar_value(v), s);
  }
  void arange(const Tensor& out, const Scalar& start, const Scalar& step) override {
    DeviceGuard guard(out.device().index);
    launch_arange(out.data_ptr(), out.dtype(), out.numel(), start.to_int(), step.to_int(),
                  start.to_double(), step.to_double(), stream_for(out));
  }
  void linspace(const Tensor& out, double start, double end) override {
    DeviceGuard guard(out.device().index);
    launch_linspace(out.data_ptr(), out.dtype(), out.numel(), start, end, stream_for(out));
  }
  void random(const Tensor& out, const backend::RandomFill& fill) override {
    DeviceGuard guard(out.device().index);
    RandomArgs r;
    r.kind = static_cast<int>(fill.kind);
    r.seed = fill.seed;
    r.first_block = fill.first_block;
    r.bits = backend::uniform_bits(out.dtype());
    r.low = fill.low;
    r.range = fill.range;
    r.p = fill.p;
    launch_random(out.data_ptr(), out.dtype(), out.numel(), r, stream_for(out));
  }

  bool has_pointwise(const std::string& functor, DType compute) const override {
    const pw::PointwiseKernel* k = pw::find_pointwise(functor);
    return k != nullptr && pw::in_set(k->set, compute);
  }
  void pointwise(const std::string& functor, const std::vector<Scalar>& extra, DType compute,
                 const Tensor& out, const std::vector<Tensor>& inputs) override {
    run_pointwise(functor, extra, compute, out, inputs, nullptr);
  }
  bool pointwise_checked_divisor(const std::string& functor, const std::vector<Scalar>& extra,
                                 DType compute, const Tensor& out,
                                 const std::vector<Tensor>& inputs,
                                 const std::string& message) override {
    run_pointwise(functor, extra, compute, out, inputs, &message);
    return true;
  }

 private:
  /// pointwise(), with the divisor check raising `message` when it is not null.
  void run_pointwise(const std::string& functor, const std::vector<Scalar>& extra, DType compute,
                     const Tensor& out, const std::vector<Tensor>& inputs,
                     const std::string* message) {
    const pw::PointwiseKernel* k = pw::find_pointwise(functor);
    SMELT_INTERNAL_ASSERT(k != nullptr && static_cast<int>(inputs.size()) == k->arity &&
                              static_cast<int>(extra.size()) == k->n_extra,
                          "pointwise: no CUDA kernel {} for {} inputs and {} extra arguments",
                          functor, inputs.size(), extra.size());
    if (out.numel() == 0) return;
    DeviceGuard guard(out.device().index);
    PointwiseArgs a;
    make_elementwise(out, inputs, a);
    a.compute = compute;
    if (inputs.size() >= 2 && inputs[1].numel() == 1 &&
        ::smelt::pw::unrounded_single_operand(functor))
      a.in[1].unrounded = true;
    a.nextra = static_cast<int>(extra.size());
    for (size_t e = 0; e < extra.size(); ++e) a.extra[e] = scalar_value(extra[e]);
    a.device = out.device().index;
    a.stream = stream_for(out);
    if (message) a.error_flag = arm_error_flag(a.device, *message, &a.error_code);
    k->run(a);
  }

 public:
  void reduce(backend::ReduceOp op, const Tensor& x, const std::vector<int64_t>& dims,
              const Tensor& out) override {
    impl::reduce(op, x, dims, out);
  }
  void arg_reduce(const Tensor& x, const std::vector<int64_t>& dims, const Tensor& values,
                  const Tensor& indices, bool is_max) override {
    impl::arg_reduce(x, dims, values, indices, is_max);
  }
  void var(const Tensor& x, const std::vector<int64_t>& dims, double correction, bool take_sqrt,
           const Tensor& var, const Tensor& mean) override {
    impl::var(x, dims, correction, take_sqrt, var, mean);
  }
  void cumsum(const Tensor& x, int64_t dim, const Tensor& out) override {
    impl::cumsum(x, dim, out);
  }

  bool fused_softmax(const Tensor& x, bool log, const Tensor& out) override {
    DeviceGuard guard(x.device().index);
    const int64_t n = x.size(-1);
    launch_softmax(x.data_ptr(), out.data_ptr(), x.dtype(), x.numel() / n, n, log, stream_for(x));
    return true;
  }
  bool fused_layer_norm(const Tensor& x, int64_t n, const Tensor& weight, const Tensor& bias,
                        double eps, const Tensor& out) override {
    if (n <= 0) return false;
    DeviceGuard guard(x.device().index);
    launch_layer_norm(x.data_ptr(), out.data_ptr(), x.dtype(), x.numel() / n, n,
                      weight.defined() ? weight.data_ptr() : nullptr,
                      bias.defined() ? bias.data_ptr() : nullptr, eps, stream_for(x));
    return true;
  }

  bool fused_batch_norm_apply(const Tensor& x, const Tensor& mean, const Tensor& var,
                              const Tensor& weight, const Tensor& bias, double eps,
                              const Tensor& out) override {
    const int64_t channels = x.size(1), hw = channels > 0 ? x.numel() / x.size(0) / channels : 0;
    // A block per plane: planes too small to fill one go op by op.
    if (hw < 128) return false;
    DeviceGuard guard(x.device().index);
    launch_batch_norm_apply(x.data_ptr(), out.data_ptr(), x.dtype(), x.numel() / hw, channels, hw,
                            mean.data_ptr(), var.data_ptr(),
                            weight.defined() ? weight.data_ptr() : nullptr,
                            bias.defined() ? bias.data_ptr() : nullptr, eps, stream_for(x));
    return true;
  }

  /// smelt's kernels take masks, cuDNN's (which adds head dims) does not: a
  /// masked call of a head dim only cuDNN has decomposes where it is planned.
  bool has_fused_attention(DType dtype, int64_t head_dim, bool masked) const override {
    return flash_attention_supported(dtype, head_dim) || attention_f32_supported(dtype, head_dim) ||
           (!masked && cudnn_attention_supported(dtype, head_dim));
  }
  bool fused_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& attn_mask,
                       bool is_causal, double scale, const Tensor& out) override {
    if (q.dim() != 4 || k.dim() != 4 || v.dim() != 4) return false;
    const int64_t E = q.size(3), L = q.size(2), S = k.size(2);
    const bool own_kernel = flash_attention_supported(q.dtype(), E);
    // float32: attention_f32.cu's kernel (CUDA cores; scalar loads, any alignment).
    const bool f32_kernel = attention_f32_supported(q.dtype(), E);
    if (!(own_kernel || f32_kernel || cudnn_attention_supported(q.dtype(), E)) || k.size(3) != E ||
        v.size(3) != E || v.size(2) != S || S == 0 || L > INT32_MAX || S > INT32_MAX)
      return false;
    for (int d = 0; d < 2; ++d)
      if (k.size(d) != q.size(d) || v.size(d) != q.size(d)) return false;  // no broadcasting
    AttentionArgs a;
    const Tensor* ts[4] = {&q, &k, &v, &out};
    int64_t* strides[4] = {a.q_stride, a.k_stride, a.v_stride, a.o_stride};
    for (int t = 0; t < 4; ++t) {
      const Tensor& x = *ts[t];
      if (x.dtype() != q.dtype() || x.stride(3) != 1) return false;
      if (!f32_kernel && reinterpret_cast<uintptr_t>(x.data_ptr()) % 16 != 0) return false;
      for (int d = 0; d < 3; ++d) {
        if (!f32_kernel && x.stride(d) % 8 != 0) return false;  // 16-byte rows
        strides[t][d] = x.stride(d);
      }
    }
    a.q = q.data_ptr();
    a.k = k.data_ptr();
    a.v = v.data_ptr();
    a.out = out.data_ptr();
    a.batch = q.size(0);
    a.heads = q.size(1);
    a.L = static_cast<int>(L);
    a.S = static_cast<int>(S);
    a.head_dim = static_cast<int>(E);
    a.scale = static_cast<float>(scale);
    if (attn_mask.defined() && !attention_mask_args(attn_mask, q, S, a)) return false;
    DeviceGuard guard(q.device().index);
    // smelt's kernels put batch x heads on the grid's y dimension.
    const bool fits_grid = a.batch * a.heads <= kMaxGridY;
    if (f32_kernel) {
      if (!fits_grid) return false;
      launch_attention_f32(a, is_causal, stream_for(q));
      return true;
    }
    if (L >= kCudnnAttentionMinQueries && (!own_kernel || S >= kCudnnAttentionMinKeys) &&
        cudnn_attention(a, q.dtype(), is_causal, q.device().index, stream_for(q)))
      return true;
    // Without a mask smelt's kernel scales the running max, not each score
    // (exponents x * scale - max): that max is the scaled scores' only for a
    // positive scale, and -inf * 0 is NaN.
    if (!own_kernel || !(scale > 0) || !fits_grid) return false;
    launch_flash_attention(a, q.dtype(), is_causal, stream_for(q));
    return true;
  }

  void index_select(const Tensor& out, const Tensor& x, int64_t dim, const Tensor& index) override {
    if (out.numel() == 0) return;
    DeviceGuard guard(out.device().index);
    const Tensor idx = int64_index(index);
    GatherArgs a = gather_geometry(out, x, dim, "index_select (embedding)", index);
    a.index = static_cast<const char*>(idx.data_ptr());
    a.select = true;
    a.n = idx.numel();
    a.inner = 1;
    for (int64_t d = dim + 1; d < out.dim(); ++d) a.inner *= out.sizes()[static_cast<size_t>(d)];
    launch_gather(a);
  }
  void gather(const Tensor& out, const Tensor& x, int64_t dim, const Tensor& index) override {
    if (out.numel() == 0) return;
    DeviceGuard guard(out.device().index);
    GatherArgs a = gather_geometry(out, x, dim, "gather", index);
    a.index = static_cast<const char*>(index.data_ptr());
    a.index_dtype = index.dtype();
    const int64_t isz = static_cast<int64_t>(index.element_size());
    for (int64_t d = 0; d < index.dim(); ++d)
      a.index_strides[d] = index.strides()[static_cast<size_t>(d)] * isz;
    launch_gather(a);
  }
  void scatter_add(const Tensor& out, int64_t dim, const Tensor& index,
                   const Tensor& src) override {
    if (index.numel() == 0) return;
    SMELT_CHECK(index.dim() <= kMaxDims, "CUDA scatter_add: at most {} dims are supported",
                kMaxDims);
    DeviceGuard guard(out.device().index);
    ScatterAddArgs a;
    const int64_t nd = index.dim();
    // Byte strides of an operand along index's dims (0-dim: one line of one element).
    auto bytes = [](const Tensor& t, int64_t d) {
      return t.dim() == 0
                 ? 0
                 : t.strides()[static_cast<size_t>(d)] * static_cast<int64_t>(t.element_size());
    };
    a.lines.ndim = static_cast<int>(std::max<int64_t>(nd, 1));
    a.lines.sizes[0] = 1;
    a.lines.numel = 1;
    for (int64_t d = 0; d < nd; ++d) {
      const int64_t size = d == dim ? 1 : index.sizes()[static_cast<size_t>(d)];
      a.lines.sizes[d] = size;
      a.lines.numel *= size;
      a.out_strides[d] = d == dim ? 0 : bytes(out, d);
      a.src_strides[d] = d == dim ? 0 : bytes(src, d);
      a.index_strides[d] = d == dim ? 0 : bytes(index, d);
    }
    a.len = nd == 0 ? 1 : index.sizes()[static_cast<size_t>(dim)];
    a.out_dim_stride = bytes(out, dim);
    a.src_dim_stride = bytes(src, dim);
    a.index_dim_stride = bytes(index, dim);
    a.out = static_cast<char*>(out.data_ptr());
    a.src = static_cast<const char*>(src.data_ptr());
    a.dtype = out.dtype();
    a.index = static_cast<const char*>(index.data_ptr());
    a.index_dtype = index.dtype();
    a.size = out.dim() == 0 ? 1 : out.sizes()[static_cast<size_t>(dim)];
    a.error_flag = arm_index_flag("scatter_add", out, dim, a.size, index, &a.error_code);
    a.stream = stream_for(out);
    launch_scatter_add(a);
  }
  void index_copy(const Tensor& out, const Tensor& index, const Tensor& src) override {
    if (index.numel() == 0 || out.numel() == 0) return;
    DeviceGuard guard(out.device().index);
    const Tensor idx = int64_index(index);
    const int64_t row_elems = out.dim() == 0 ? 1 : out.numel() / out.sizes()[0];
    launch_index_copy(static_cast<char*>(out.data_ptr()), static_cast<const char*>(src.data_ptr()),
                      static_cast<const int64_t*>(idx.data_ptr()), idx.numel(),
                      row_elems * static_cast<int64_t>(out.element_size()),
                      static_cast<int>(out.element_size()), stream_for(out));
  }
  void triangle_zero(const Tensor& out, int64_t diagonal, bool lower) override {
    if (out.numel() == 0) return;
    DeviceGuard guard(out.device().index);
    launch_triangle_zero(static_cast<char*>(out.data_ptr()), out.numel(), out.size(-2),
                         out.size(-1), diagonal, lower, static_cast<int>(out.element_size()),
                         stream_for(out));
  }

  void sgd_step(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                const std::vector<Tensor>& momentum_buffers,
                const optim_ops::SgdHyper& hyper) override {
    impl::sgd_step(params, grads, momentum_buffers, hyper);
  }
  void adam_step(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                 const std::vector<Tensor>& exp_avgs, const std::vector<Tensor>& exp_avg_sqs,
                 const std::vector<Tensor>& max_exp_avg_sqs,
                 const std::vector<optim_ops::AdamHyper>& hyper) override {
    impl::adam_step(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, hyper);
  }

 private:
  /// The part of a gather shared by index_select and gather: out's shape
  /// (unmerged) and x's byte strides over it, 0 along `dim`.
  /// The device error flag of an index check of `op` along `dim` of `self`
  /// (size `size`): its message, as eager CPU raises it but without the value,
  /// which only the device has read.
  static int* arm_index_flag(const char* op, const Tensor& self, int64_t dim, int64_t size,
                             const Tensor& index, int* code) {
    return arm_error_flag(
        self.device().index,
        fmt::format("{}: an index is out of bounds for dimension {} with size {} (self shape {}, "
                    "index shape {}); indices must be in [0, {})",
                    op, dim, size, detail::shape_str(self.sizes()),
                    detail::shape_str(index.sizes()), size),
        code);
  }

  static GatherArgs gather_geometry(const Tensor& out, const Tensor& x, int64_t dim, const char* op,
                                    const Tensor& index) {
    GatherArgs a;
    a.size = x.dim() == 0 ? 1 : x.sizes()[static_cast<size_t>(dim)];
    a.error_flag = arm_index_flag(op, x, dim, a.size, index, &a.error_code);
    SMELT_CHECK(out.dim() <= kMaxDims, "CUDA gather: at most {} dims are supported", kMaxDims);
    const int64_t isz = static_cast<int64_t>(x.element_size());
    a.geom.ndim = static_cast<int>(std::max<int64_t>(out.dim(), 1));
    a.geom.numel = out.numel();
    a.geom.sizes[0] = 1;
    for (int64_t d = 0; d < out.dim(); ++d) {
      a.geom.sizes[d] = out.sizes()[static_cast<size_t>(d)];
      a.x_strides[d] = d == dim || x.dim() == 0 ? 0 : x.strides()[static_cast<size_t>(d)] * isz;
    }
    a.x_dim_stride = x.dim() == 0 ? 0 : x.strides()[static_cast<size_t>(dim)] * isz;
    a.out = static_cast<char*>(out.data_ptr());
    a.x = static_cast<const char*>(x.data_ptr());
    a.elem = static_cast<int>(x.element_size());
    a.stream = stream_for(out);
    return a;
  }

  CachingAllocator allocator_;
  HostAllocator host_allocator_;
};

/// Registered before main() (all of smelt's objects are linked, see CMakeLists.txt).
const bool kRegistered = [] {
  static CudaBackend* cuda = new CudaBackend;  // never destroyed: storages may outlive main()
  backend::register_backend(cuda);
  return true;
}();

}  // namespace

}  // namespace smelt::cuda::impl
