// The CUDA caching allocator, after PyTorch's CUDACachingAllocator: device
// memory is taken from cudaMalloc in segments and handed out in blocks; a freed
// block is not returned to the driver but cached for the next request of its
// size class on the same stream (stream-ordered reuse: work queued on that
// stream before the free has been ordered before any later use, so no
// synchronization is needed). Requests are rounded to 512 bytes. Blocks of up
// to 1 MiB come from 2 MiB segments (the small pool); larger ones from
// segments of 20 MiB (requests under 10 MiB) or of the request rounded to
// 2 MiB (the large pool). A cached block larger than the request is split
// (the rest stays cached when it is at least 512 bytes in the small pool, more
// than 1 MiB in the large one); a freed block merges with free neighbours of
// its segment.
//
// When cudaMalloc fails, every cached segment with no block in use is
// released and the allocation retried once; if that fails too, the
// allocation raises smelt::OutOfMemoryError saying how much was asked for,
// how much smelt has allocated and reserved on the device and how much the
// device has free, and the process stays usable.
//
// CUDA graphs (graphs.h): a recording runs on a stream of its own, and the
// blocks allocated on that stream are the recording's private pool (PyTorch's
// graph pools): nothing else allocates on that stream, so they are never
// handed to other work, and they are not returned to the device (empty_cache,
// an out-of-memory retry) until the recording is gone. While a recording is
// under way, no memory is returned to the device and freed blocks waiting for
// other streams stay waiting (neither is allowed during a capture); a segment
// allocated meanwhile is taken with cudaMalloc outside the capture's rules
// (the capture does not record it, as PyTorch's allocator does).
//
// A tensor used on a stream other than the one it was allocated on must be
// declared with record_stream (torch.Tensor.record_stream) or synchronized by
// the user before it is freed: a freed block with recorded streams records an
// event on each and is reused only once they have all completed.
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>

#include "backend/backend.h"
#include "core/allocator.h"

namespace smelt::cuda::impl {

class CachingAllocator final : public Allocator {
 public:
  CachingAllocator();
  ~CachingAllocator() override;
  /// `nbytes` on `device` (a CUDA device that exists), for use on the calling
  /// thread's current stream of that device.
  void* allocate(size_t nbytes, Device device) override;
  void deallocate(void* p, Device device) override;
  /// Declares that block `p` (a pointer allocate() returned, still live) is
  /// used by work on `stream` (see the file comment); nothing for its own
  /// stream or for memory it did not allocate.
  void record_stream(void* p, cudaStream_t stream);

  /// CUDA graphs: a recording starts on `stream` (see the file comment);
  /// its blocks are a private pool until release_pool(stream).
  void begin_capture(cudaStream_t stream);
  /// The recording on `stream` ended (its pool stays private).
  void end_capture(cudaStream_t stream);
  /// Bytes of device memory in the segments of `stream`'s pool.
  int64_t pool_bytes(cudaStream_t stream);
  /// The recording of `stream` is gone: its free segments are returned to the
  /// device (cudaFree, which waits for the device), and the pool is no longer private.
  void release_pool(cudaStream_t stream);

  backend::MemoryStats stats(int device);
  void reset_peak(int device);
  /// Releases (cudaFree) every cached segment none of whose blocks is in use.
  void empty_cache();

 private:
  struct Impl;
  Impl* impl_;
};

}  // namespace smelt::cuda::impl
