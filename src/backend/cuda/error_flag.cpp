// Device-side error flags (error_flag.h).
#include "backend/cuda/error_flag.h"

#include <atomic>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device.h"
#include "smelt/error.h"

namespace smelt::cuda::impl {

namespace {

struct Flags {
  std::mutex mu;
  int* host = nullptr;    // kMaxDevices ints of mapped pinned memory (null until first armed)
  int* device = nullptr;  // the same memory as kernels address it
  std::vector<std::string> messages;  // code c > 0 is messages[c - 1]
  std::unordered_map<std::string, int> codes;
};
Flags& flags() {
  static Flags* f = new Flags;  // never destroyed: kernels may still run at exit
  return *f;
}

}  // namespace

int* arm_error_flag(int device, const std::string& message, int* code) {
  Flags& f = flags();
  std::lock_guard<std::mutex> lock(f.mu);
  if (f.host == nullptr) {
    void* p = nullptr;
    // Allowed while a CUDA graph is recorded (a checked op's first launch
    // may be recorded): the allocation is not part of the recording.
    cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    SMELT_CUDA_CHECK(cudaThreadExchangeStreamCaptureMode(&mode));
    const cudaError_t err =
        cudaHostAlloc(&p, kMaxDevices * sizeof(int), cudaHostAllocMapped | cudaHostAllocPortable);
    SMELT_CUDA_CHECK(cudaThreadExchangeStreamCaptureMode(&mode));
    SMELT_CUDA_CHECK(err);
    for (int d = 0; d < kMaxDevices; ++d) static_cast<int*>(p)[d] = 0;
    void* dev = nullptr;
    SMELT_CUDA_CHECK(cudaHostGetDevicePointer(&dev, p, 0));
    f.device = static_cast<int*>(dev);
    f.host = static_cast<int*>(p);
  }
  auto [it, added] = f.codes.emplace(message, static_cast<int>(f.messages.size()) + 1);
  if (added) f.messages.push_back(message);
  *code = it->second;
  return f.device + device;
}

void raise_device_errors() {
  Flags& f = flags();
  int* host = nullptr;
  {
    std::lock_guard<std::mutex> lock(f.mu);
    host = f.host;
  }
  if (host == nullptr) return;
  int code = 0;
  for (int d = 0; d < device_count() && code == 0; ++d)
    code = std::atomic_ref<int>(host[d]).exchange(0);
  if (code == 0) return;
  std::string message;
  {
    std::lock_guard<std::mutex> lock(f.mu);
    message = code > 0 && static_cast<size_t>(code) <= f.messages.size()
                  ? f.messages[static_cast<size_t>(code) - 1]
                  : "a CUDA kernel reported a failed check with an unknown code (a bug)";
  }
  detail::throw_error(message);
}

}  // namespace smelt::cuda::impl
