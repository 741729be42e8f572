// Device-side error flags (error_flag.h).
#include "backend/cuda/error_flag.h"

#include <fmt/format.h>

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
  // Slots of compiled launches: chunks of mapped ints, each slot's messages.
  std::vector<int*> slot_host;    // chunk starts (kSlotsPerChunk ints each)
  std::vector<int*> slot_device;  // the same chunks as kernels address them
  std::vector<std::vector<std::string>> slot_messages;
  std::atomic<size_t> slots{0};  // armed slots; read without the lock by raise
};
constexpr size_t kSlotsPerChunk = 1024;
constexpr size_t kMaxSlots = 64 * kSlotsPerChunk;

/// `ints` zeroed ints of mapped, page-locked host memory: the host pointer,
/// and the device's view in `*device`. Allowed while a CUDA graph is recorded
/// (a checked launch may be recorded first): the allocation is not recorded.
int* alloc_mapped(size_t ints, int** device) {
  void* p = nullptr;
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  SMELT_CUDA_CHECK(cudaThreadExchangeStreamCaptureMode(&mode));
  const cudaError_t err =
      cudaHostAlloc(&p, ints * sizeof(int), cudaHostAllocMapped | cudaHostAllocPortable);
  SMELT_CUDA_CHECK(cudaThreadExchangeStreamCaptureMode(&mode));
  SMELT_CUDA_CHECK(err);
  for (size_t i = 0; i < ints; ++i) static_cast<int*>(p)[i] = 0;
  void* dev = nullptr;
  SMELT_CUDA_CHECK(cudaHostGetDevicePointer(&dev, p, 0));
  *device = static_cast<int*>(dev);
  return static_cast<int*>(p);
}
Flags& flags() {
  static Flags* f = new Flags;  // never destroyed: kernels may still run at exit
  return *f;
}

}  // namespace

int* arm_error_flag(int device, const std::string& message, int* code) {
  Flags& f = flags();
  std::lock_guard<std::mutex> lock(f.mu);
  if (f.host == nullptr) f.host = alloc_mapped(kMaxDevices, &f.device);
  auto [it, added] = f.codes.emplace(message, static_cast<int>(f.messages.size()) + 1);
  if (added) f.messages.push_back(message);
  *code = it->second;
  return f.device + device;
}

int* arm_error_slot(std::vector<std::string> messages) {
  Flags& f = flags();
  std::lock_guard<std::mutex> lock(f.mu);
  const size_t n = f.slots.load();
  if (n == kMaxSlots)
    detail::throw_error(fmt::format(
        "smelt::compile: {} compiled CUDA kernels with runtime checks (integer division, "
        "indexing) have been loaded in this process, the most it keeps error flags for; "
        "reuse compiled functions instead of compiling new ones in a loop",
        kMaxSlots));
  if (n % kSlotsPerChunk == 0) {
    int* dev = nullptr;
    f.slot_host.push_back(alloc_mapped(kSlotsPerChunk, &dev));
    f.slot_device.push_back(dev);
  }
  f.slot_messages.push_back(std::move(messages));
  f.slots.store(n + 1);
  return f.slot_device[n / kSlotsPerChunk] + n % kSlotsPerChunk;
}

void raise_device_errors() {
  Flags& f = flags();
  const size_t slots = f.slots.load();
  int* host = nullptr;
  {
    std::lock_guard<std::mutex> lock(f.mu);
    host = f.host;
  }
  if (host == nullptr && slots == 0) return;
  std::string message;
  if (host != nullptr) {
    int code = 0;
    for (int d = 0; d < device_count() && code == 0; ++d)
      code = std::atomic_ref<int>(host[d]).exchange(0);
    if (code != 0) {
      std::lock_guard<std::mutex> lock(f.mu);
      message = code > 0 && static_cast<size_t>(code) <= f.messages.size()
                    ? f.messages[static_cast<size_t>(code) - 1]
                    : "a CUDA kernel reported a failed check with an unknown code (a bug)";
    }
  }
  if (message.empty() && slots > 0) {
    std::lock_guard<std::mutex> lock(f.mu);
    for (size_t i = 0; i < slots && message.empty(); ++i) {
      int& slot = f.slot_host[i / kSlotsPerChunk][i % kSlotsPerChunk];
      const int code = std::atomic_ref<int>(slot).exchange(0);
      if (code == 0) continue;
      const auto& m = f.slot_messages[i];
      message = code > 0 && static_cast<size_t>(code) <= m.size()
                    ? m[static_cast<size_t>(code) - 1]
                    : "a compiled CUDA kernel reported a failed check with an unknown code (a bug)";
    }
  }
  if (!message.empty()) detail::throw_error(message);
}

}  // namespace smelt::cuda::impl
