// The CUDA multi-tensor optimizer steps (optim.h): the tables optim.cu reads,
// built on the host and copied to the device in one transfer on the stream
// the kernel runs on (the scratch tensor holding them is freed after the
// launch: the caching allocator's stream-ordered reuse keeps that safe).
#include "backend/cuda/optim.h"

#include <cstring>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device.h"
#include "backend/cuda/graphs.h"
#include "backend/cuda/kernels.h"

namespace smelt::cuda::impl {

namespace {

void* ptr(const std::vector<Tensor>& l, size_t i) { return l.empty() ? nullptr : l[i].data_ptr(); }

size_t align16(size_t n) { return (n + 15) / 16 * 16; }

/// Copies the tables (tensors, then `extra` bytes, then chunks) to the device
/// and runs `launch(args, extra_on_device)`.
template <class Launch>
void run_group(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
               const std::vector<Tensor>& a, const std::vector<Tensor>& b,
               const std::vector<Tensor>& c, const void* extra, size_t extra_bytes,
               const Launch& launch) {
  if (params.empty()) return;
  std::vector<OptimTensor> tensors(params.size());
  std::vector<OptimChunk> chunks;
  for (size_t i = 0; i < params.size(); ++i) {
    tensors[i] = {params[i].data_ptr(), grads[i].data_ptr(), ptr(a, i), ptr(b, i), ptr(c, i),
                  params[i].numel()};
    for (int64_t begin = 0; begin < tensors[i].n; begin += kOptimChunk)
      chunks.push_back({static_cast<int64_t>(i), begin});
  }
  if (chunks.empty()) return;
  const size_t t_bytes = align16(tensors.size() * sizeof(OptimTensor));
  const size_t e_bytes = align16(extra_bytes);
  const size_t total = t_bytes + e_bytes + chunks.size() * sizeof(OptimChunk);
  std::vector<unsigned char> host(total);
  std::memcpy(host.data(), tensors.data(), tensors.size() * sizeof(OptimTensor));
  if (extra_bytes) std::memcpy(host.data() + t_bytes, extra, extra_bytes);
  std::memcpy(host.data() + t_bytes + e_bytes, chunks.data(), chunks.size() * sizeof(OptimChunk));

  const Device device = params[0].device();
  DeviceGuard guard(device.index);
  const cudaStream_t stream = current_stream(device.index);
  Tensor table =
      detail::make_empty({static_cast<int64_t>(total)}, DType::UInt8, device, "optimizer step");
  char* d = static_cast<char*>(table.data_ptr());
  if (capturing()) {
    // Recorded into a CUDA graph: the copy reads its source at every replay,
    // so the tables are staged in pinned memory that lives as long as the graph.
    void* pinned = nullptr;
    cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;  // not part of the recording
    SMELT_CUDA_CHECK(cudaThreadExchangeStreamCaptureMode(&mode));
    const cudaError_t err = cudaHostAlloc(&pinned, total, cudaHostAllocPortable);
    SMELT_CUDA_CHECK(cudaThreadExchangeStreamCaptureMode(&mode));
    SMELT_CUDA_CHECK(err);
    std::memcpy(pinned, host.data(), total);
    keep_for_recording(std::shared_ptr<void>(pinned, [](void* p) { (void)cudaFreeHost(p); }));
    SMELT_CUDA_CHECK(cudaMemcpyAsync(d, pinned, total, cudaMemcpyHostToDevice, stream));
  } else {
    // From pageable memory: returns once `host` has been staged.
    SMELT_CUDA_CHECK(cudaMemcpyAsync(d, host.data(), total, cudaMemcpyHostToDevice, stream));
  }
  OptimArgs args;
  args.dtype = params[0].dtype();
  args.tensors = reinterpret_cast<const OptimTensor*>(d);
  args.chunks = reinterpret_cast<const OptimChunk*>(d + t_bytes + e_bytes);
  args.n_chunks = static_cast<int64_t>(chunks.size());
  args.stream = stream;
  launch(args, d + t_bytes);
}

}  // namespace

void sgd_step(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
              const std::vector<Tensor>& momentum_buffers, const optim_ops::SgdHyper& hyper) {
  run_group(params, grads, momentum_buffers, {}, {}, nullptr, 0,
            [&](const OptimArgs& args, const char*) { launch_sgd_step(args, hyper); });
}

void adam_step(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
               const std::vector<Tensor>& exp_avgs, const std::vector<Tensor>& exp_avg_sqs,
               const std::vector<Tensor>& max_exp_avg_sqs,
               const std::vector<optim_ops::AdamHyper>& hyper) {
  static_assert(std::is_trivially_copyable_v<optim_ops::AdamHyper>);
  run_group(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, hyper.data(),
            hyper.size() * sizeof(optim_ops::AdamHyper), [&](const OptimArgs& args, const char* h) {
              launch_adam_step(args, reinterpret_cast<const optim_ops::AdamHyper*>(h));
            });
}

}  // namespace smelt::cuda::impl
