// The CUDA backend's pinned host memory, after PyTorch's CachingHostAllocator:
// page-locked blocks from cudaHostAlloc (portable: every device may copy from
// them), sizes rounded up to a power of two (at least 512 bytes) and cached by
// size when freed. An asynchronous copy that uses a block records an event on
// its stream (record_use); a freed block with events pending is handed out
// again only once they have all completed, so a pinned tensor may be dropped
// right after a non_blocking copy. empty_cache releases the cached blocks.
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>

#include "core/allocator.h"

namespace smelt::cuda::impl {

class HostAllocator final : public Allocator {
 public:
  HostAllocator();
  ~HostAllocator() override;
  /// `nbytes` of pinned host memory (`device` is the CPU); Error when CUDA
  /// has no device or cudaHostAlloc fails (OutOfMemoryError).
  void* allocate(size_t nbytes, Device device) override;
  void deallocate(void* p, Device device) override;
  /// Marks the block holding address `p` (any address inside a live block) as
  /// used by the work queued so far on `stream` of device `device`.
  void record_use(const void* p, int device, cudaStream_t stream);
  /// cudaFreeHost of every cached block none uses.
  void empty_cache();

 private:
  struct Impl;
  Impl* impl_;
};

}  // namespace smelt::cuda::impl
