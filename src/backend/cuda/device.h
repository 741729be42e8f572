// CUDA devices and streams as the backend sees them: how many GPUs there are
// (0 on a machine without GPU or driver: not an error, the CUDA tests skip),
// the calling thread's current device (PyTorch's torch.cuda.current_device),
// a scoped device switch, cached device properties, and the calling thread's
// current stream per device (the legacy default stream unless set).
#pragma once
#include <cuda_runtime_api.h>

#include "smelt/device.h"

namespace smelt::cuda::impl {

/// Upper bound on device indices smelt tracks per thread.
inline constexpr int kMaxDevices = 64;

/// GPUs visible to this process; 0 when there is none or no usable driver.
/// Cached after the first call.
int device_count();
/// The calling thread's current device (0 unless set_device chose another).
int current_device();
/// Makes `index` the current device of the calling thread; Error when there is
/// no such device.
void set_device(int index);
/// Error (naming `what`) unless `device` is a CUDA device present here:
/// "no CUDA device" without any GPU, the valid range otherwise.
void require_device(Device device, const char* what);

/// Switches the calling thread to `index` for its lifetime (no-op when it is
/// current already), as c10::cuda::CUDAGuard.
class DeviceGuard {
 public:
  explicit DeviceGuard(int index);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int prev_ = -1;
};

/// Properties of device `index` (cached).
const cudaDeviceProp& properties(int index);

/// The calling thread's current stream on device `index` (nullptr: the legacy
/// default stream, which orders with every blocking stream of the device).
cudaStream_t current_stream(int index);
void set_current_stream(int index, cudaStream_t stream);

}  // namespace smelt::cuda::impl
