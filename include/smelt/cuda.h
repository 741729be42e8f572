// smelt/cuda.h — NVIDIA GPUs, as torch.cuda: whether there is one, devices,
// synchronization, the caching allocator's statistics, streams and events.
// Tensors go to a GPU with t.to(Device("cuda")), t.cuda() or
// TensorOptions().device(...); ops on them run there. Every function here also
// exists in a build without CUDA (is_available() is false, device_count() 0,
// the others raise smelt::Error saying so).
//
// Launches are asynchronous: an op queues its kernels on the current stream
// of its device and returns. The host waits where a value reaches it —
// item(), to_vector(), printing, copies to the CPU — or where asked to
// (synchronize(), Stream::synchronize(), Event::synchronize()). An error
// found by a kernel (an integer division by zero) is raised as smelt::Error,
// naming the op, at the next of these synchronization points.
//
// Copies between the CPU and a GPU are asynchronous through pinned memory:
// Tensor::pin_memory(), then t.to(device, /*non_blocking=*/true).
// Tensor::record_stream tells the caching allocator about a tensor used on
// another stream.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "smelt/device.h"

namespace smelt {

/// torch.set_float32_matmul_precision: "highest" (the default: float32
/// products in exact float32), "high" or "medium" (TF32 tensor cores allowed
/// on GPUs). Error for another string.
void set_float32_matmul_precision(const std::string& precision);
std::string get_float32_matmul_precision();

namespace cuda {

/// True when smelt has its CUDA backend and this machine has a GPU for it.
bool is_available();
/// GPUs visible to this process (0 without CUDA or a GPU).
int device_count();
/// The calling thread's current device index (the device of Device("cuda")
/// in t.cuda()); set_device changes it (Error for a device that does not exist).
int current_device();
void set_device(int index);
/// Waits for all work queued on `device` (every stream). Default: the current device.
void synchronize(int device = -1);

/// The caching allocator's counters for one device (bytes; counts since start).
struct MemoryStats {
  int64_t allocated = 0;       // held by live tensors (rounded to 512-byte classes)
  int64_t reserved = 0;        // obtained with cudaMalloc: allocated + cached
  int64_t peak_allocated = 0;  // highest `allocated` since start or reset_peak_memory_stats
  int64_t peak_reserved = 0;
  int64_t num_device_allocs = 0;  // cudaMalloc calls
  int64_t num_device_frees = 0;   // cudaFree calls
  int64_t num_alloc_retries = 0;  // failed cudaMallocs retried after emptying the cache
  int64_t num_ooms = 0;           // allocations that failed after the retry
};
/// Default device: the current one.
MemoryStats memory_stats(int device = -1);
void reset_peak_memory_stats(int device = -1);
/// Returns cached, unused device memory to the driver (torch.cuda.empty_cache).
void empty_cache();

/// A queue of GPU work (cudaStream_t). Copies share the stream, which is
/// destroyed with its last copy; the default stream is never destroyed.
class Stream {
 public:
  /// A new stream on `device` (default: the current device).
  static Stream create(int device = -1);
  /// The legacy default stream of `device`.
  static Stream default_stream(int device = -1);
  Device device() const { return device_; }
  /// The cudaStream_t (nullptr for the default stream).
  void* handle() const { return handle_ ? handle_.get() : nullptr; }
  /// Waits until all work queued on it has run.
  void synchronize() const;
  bool operator==(const Stream& o) const { return handle() == o.handle() && device_ == o.device_; }

 private:
  friend Stream current_stream(int device);
  Stream(Device d, std::shared_ptr<void> h) : device_(d), handle_(std::move(h)) {}
  Device device_;
  std::shared_ptr<void> handle_;
};

/// The calling thread's current stream on `device` (default: current device);
/// ops on that device queue their work there.
Stream current_stream(int device = -1);
/// Makes `s` the current stream of its device for the calling thread.
void set_stream(const Stream& s);

/// Makes a stream current for its lifetime, restoring the previous one after.
class StreamGuard {
 public:
  explicit StreamGuard(const Stream& s);
  ~StreamGuard();
  StreamGuard(const StreamGuard&) = delete;
  StreamGuard& operator=(const StreamGuard&) = delete;

 private:
  Stream prev_;
};

/// A point in a stream (cudaEvent_t): record it, wait for it, time between two.
class Event {
 public:
  /// With enable_timing, elapsed_time() works between two recorded events.
  explicit Event(bool enable_timing = true);
  /// Records the event at the current end of `s` (default: the current stream).
  void record();
  void record(const Stream& s);
  /// Blocks the host until the recorded work has run.
  void synchronize() const;
  /// True when it has happened (or was never recorded).
  bool query() const;
  /// Milliseconds from this event to `end` (both recorded, with timing).
  float elapsed_time(const Event& end) const;

 private:
  Device device_;
  std::shared_ptr<void> handle_;
};

}  // namespace cuda
}  // namespace smelt
