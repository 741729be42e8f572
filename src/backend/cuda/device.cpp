// CUDA devices and the per-thread current device and stream (device.h).
#include "backend/cuda/device.h"

#include <array>
#include <atomic>
#include <memory>
#include <mutex>

#include "backend/cuda/cuda_check.h"
#include "smelt/error.h"

namespace smelt::cuda::impl {

namespace {
thread_local int t_device = 0;
thread_local std::array<cudaStream_t, kMaxDevices> t_streams{};

struct PropsCache {
  std::mutex mu;  // held while a device's properties are read the first time
  std::array<std::atomic<const cudaDeviceProp*>, kMaxDevices> props{};
};
PropsCache& props_cache() {
  static PropsCache* c = new PropsCache;  // never destroyed: used until exit
  return *c;
}
}  // namespace

int device_count() {
  static const int count = [] {
    int n = 0;
    // No GPU (cudaErrorNoDevice) or no driver (cudaErrorInsufficientDriver...):
    // zero devices, and the error is cleared.
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
      (void)cudaGetLastError();
      return 0;
    }
    return n < kMaxDevices ? n : kMaxDevices;
  }();
  return count;
}

int current_device() { return t_device; }

void require_device(Device device, const char* what) {
  const int n = device_count();
  SMELT_CHECK(n > 0,
              "{}: no CUDA device: smelt has its CUDA backend but this machine shows no GPU (or "
              "no usable driver) for {}; check nvidia-smi and CUDA_VISIBLE_DEVICES, or use 'cpu'",
              what, device.str());
  SMELT_CHECK(device.index >= 0 && device.index < n,
              "{}: CUDA device {} does not exist: {} CUDA device{} visible (cuda:0{}); pick an "
              "index below {}",
              what, device.str(), n, n == 1 ? " is" : "s are",
              n > 1 ? fmt::format("..cuda:{}", n - 1) : "", n);
}

void set_device(int index) {
  require_device(Device(DeviceType::CUDA, index), "set_device");
  SMELT_CUDA_CHECK(cudaSetDevice(index));
  t_device = index;
}

DeviceGuard::DeviceGuard(int index) {
  int cur = -1;
  SMELT_CUDA_CHECK(cudaGetDevice(&cur));
  if (cur != index) {
    SMELT_CUDA_CHECK(cudaSetDevice(index));
    prev_ = cur;
  }
}

DeviceGuard::~DeviceGuard() {
  if (prev_ >= 0) (void)cudaSetDevice(prev_);
}

const cudaDeviceProp& properties(int index) {
  PropsCache& c = props_cache();
  auto& slot = c.props[static_cast<size_t>(index)];
  if (const cudaDeviceProp* p = slot.load(std::memory_order_acquire)) return *p;  // no lock
  std::lock_guard<std::mutex> lock(c.mu);
  if (const cudaDeviceProp* p = slot.load(std::memory_order_relaxed)) return *p;
  auto p = std::make_unique<cudaDeviceProp>();
  SMELT_CUDA_CHECK(cudaGetDeviceProperties(p.get(), index));
  slot.store(p.release(), std::memory_order_release);  // kept until exit
  return *slot.load(std::memory_order_relaxed);
}

cudaStream_t current_stream(int index) { return t_streams[static_cast<size_t>(index)]; }

void set_current_stream(int index, cudaStream_t stream) {
  t_streams[static_cast<size_t>(index)] = stream;
}

}  // namespace smelt::cuda::impl
