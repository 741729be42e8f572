// CUDA graphs (graphs.h).
#include "backend/cuda/graphs.h"

#include <fmt/format.h>

#include <vector>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device.h"
#include "smelt/error.h"

namespace smelt::cuda::impl {

namespace {

class CudaCapture;
thread_local CudaCapture* t_capture = nullptr;  // the recording this thread makes

/// A recorded graph, its executable form, its stream (whose blocks are its
/// private pool) and what its copies read.
class CudaGraph final : public backend::CapturedWork {
 public:
  CudaGraph(CachingAllocator& allocator, int device, cudaStream_t stream, cudaGraph_t graph,
            cudaGraphExec_t exec, std::vector<std::shared_ptr<void>> kept)
      : allocator_(allocator),
        device_(device),
        stream_(stream),
        graph_(graph),
        exec_(exec),
        kept_(std::move(kept)) {
    SMELT_CUDA_CHECK(cudaGraphGetNodes(graph_, nullptr, &nodes_));
  }
  ~CudaGraph() override {
    // Never throws (destroyed at exit too, when the runtime may be gone).
    DeviceGuard guard(device_);
    (void)cudaGraphExecDestroy(exec_);
    (void)cudaGraphDestroy(graph_);
    try {
      allocator_.release_pool(stream_);
    } catch (const Error&) {
    }
    (void)cudaStreamDestroy(stream_);
    (void)cudaGetLastError();
  }
  CudaGraph(const CudaGraph&) = delete;
  CudaGraph& operator=(const CudaGraph&) = delete;

  void replay(backend::Stream stream) override {
    DeviceGuard guard(device_);
    SMELT_CUDA_CHECK(cudaGraphLaunch(exec_, static_cast<cudaStream_t>(stream.handle)));
  }
  size_t nodes() const override { return nodes_; }
  int64_t private_bytes() const override { return allocator_.pool_bytes(stream_); }

 private:
  CachingAllocator& allocator_;
  int device_;
  cudaStream_t stream_;
  cudaGraph_t graph_;
  cudaGraphExec_t exec_;
  std::vector<std::shared_ptr<void>> kept_;
  size_t nodes_ = 0;
};

class CudaCapture final : public backend::Capture {
 public:
  CudaCapture(CachingAllocator& allocator, int device) : allocator_(allocator), device_(device) {
    SMELT_INTERNAL_ASSERT(t_capture == nullptr, "a CUDA graph recording inside another one");
    DeviceGuard guard(device_);
    SMELT_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    previous_ = current_stream(device_);
    allocator_.begin_capture(stream_);
    set_current_stream(device_, stream_);
    const cudaError_t err = cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal);
    if (err != cudaSuccess) {
      set_current_stream(device_, previous_);
      allocator_.end_capture(stream_);
      allocator_.release_pool(stream_);
      (void)cudaStreamDestroy(stream_);
      SMELT_CUDA_CHECK(err);
    }
    t_capture = this;
  }
  ~CudaCapture() override {
    if (stream_ == nullptr) return;  // finished: the graph owns the stream
    // Discarded: end the capture (whatever it recorded is dropped), then
    // return the stream and its memory.
    DeviceGuard guard(device_);
    cudaGraph_t g = nullptr;
    (void)cudaStreamEndCapture(stream_, &g);
    if (g != nullptr) (void)cudaGraphDestroy(g);
    (void)cudaGetLastError();
    stop();
    try {
      allocator_.release_pool(stream_);
    } catch (const Error&) {
    }
    (void)cudaStreamDestroy(stream_);
  }
  CudaCapture(const CudaCapture&) = delete;
  CudaCapture& operator=(const CudaCapture&) = delete;

  backend::Stream stream() const override { return {stream_}; }

  std::unique_ptr<backend::CapturedWork> finish() override {
    SMELT_INTERNAL_ASSERT(stream_ != nullptr, "a CUDA graph recording finished twice");
    DeviceGuard guard(device_);
    cudaGraph_t g = nullptr;
    const cudaError_t err = cudaStreamEndCapture(stream_, &g);
    stop();
    if (err != cudaSuccess || g == nullptr) {
      if (g != nullptr) (void)cudaGraphDestroy(g);
      (void)cudaGetLastError();
      throw Error(fmt::format("the CUDA graph recording was invalidated ({}: {})",
                              cudaGetErrorName(err), cudaGetErrorString(err)));
    }
    cudaGraphExec_t exec = nullptr;
    const cudaError_t inst = cudaGraphInstantiate(&exec, g, 0);
    if (inst != cudaSuccess) {
      (void)cudaGraphDestroy(g);
      (void)cudaGetLastError();
      throw Error(fmt::format("cudaGraphInstantiate failed ({}: {})", cudaGetErrorName(inst),
                              cudaGetErrorString(inst)));
    }
    auto work =
        std::make_unique<CudaGraph>(allocator_, device_, stream_, g, exec, std::move(kept_));
    stream_ = nullptr;  // the graph owns it now
    return work;
  }

  void keep(std::shared_ptr<void> p) { kept_.push_back(std::move(p)); }

 private:
  /// The recording is over: the thread's stream and the allocator's rules
  /// are as before.
  void stop() {
    if (t_capture != this) return;
    t_capture = nullptr;
    set_current_stream(device_, previous_);
    allocator_.end_capture(stream_);
  }

  CachingAllocator& allocator_;
  int device_;
  cudaStream_t stream_ = nullptr;
  cudaStream_t previous_ = nullptr;
  std::vector<std::shared_ptr<void>> kept_;
};

}  // namespace

std::unique_ptr<backend::Capture> begin_capture(CachingAllocator& allocator, int device) {
  return std::make_unique<CudaCapture>(allocator, device);
}

bool capturing() { return t_capture != nullptr; }

void check_not_capturing(const char* what) {
  SMELT_CHECK(t_capture == nullptr,
              "{} cannot be recorded into a CUDA graph (a replay would not repeat it)", what);
}

void keep_for_recording(std::shared_ptr<void> keep) {
  SMELT_INTERNAL_ASSERT(t_capture != nullptr, "keep_for_recording outside a CUDA graph recording");
  t_capture->keep(std::move(keep));
}

}  // namespace smelt::cuda::impl
