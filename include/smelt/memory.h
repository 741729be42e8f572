// smelt/memory.h — how much device memory tensors hold, now and at the peak
// (PyTorch's torch.cuda.memory_allocated / max_memory_allocated /
// reset_peak_memory_stats, for every device type, the CPU included), and the
// memory the device's allocator keeps for reuse (memory_reserved,
// empty_cache). The CPU allocator caches freed blocks of 1 MiB or more, up to
// SMELT_CPU_CACHE_BYTES (default 1/8 of physical memory; 0 turns it off).
//
//   smelt::reset_peak_memory_stats(smelt::kCPU);
//   step(x, y);                                    // a training step
//   int64_t peak = smelt::max_memory_allocated(smelt::kCPU);
//
// Counted: the bytes of every storage smelt allocates on the device (tensors,
// a compiled graph's arena of intermediates), from allocation to release, as
// requested (not rounded up to the allocator's alignment). Not counted: memory
// the caller owns (from_blob), allocator caches, code and library workspaces.
#pragma once
#include <cstdint>

#include "smelt/device.h"

namespace smelt {

/// Bytes of storage allocated on `device` and not yet released.
int64_t memory_allocated(Device device = kCPU);
/// The largest memory_allocated(device) since the process started or the last
/// reset_peak_memory_stats(device).
int64_t max_memory_allocated(Device device = kCPU);
/// Sets the peak of `device` to what is allocated now.
void reset_peak_memory_stats(Device device = kCPU);

/// Bytes the allocator of `device` holds: in live blocks plus cached for
/// reuse (torch.cuda.memory_reserved). On the CPU only blocks of 1 MiB or
/// more count (smaller ones come from malloc), at their rounded size (a
/// multiple of 2 MiB). Error when smelt has no backend for `device`.
int64_t memory_reserved(Device device = kCPU);
/// Returns the memory the allocator of `device` caches but no tensor uses to
/// the system (torch.cuda.empty_cache; on CUDA: of every device). Error when
/// smelt has no backend for `device`.
void empty_cache(Device device = kCPU);

}  // namespace smelt
