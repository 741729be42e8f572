// smelt/memory.h — how much device memory tensors hold, now and at the peak
// (PyTorch's torch.cuda.memory_allocated / max_memory_allocated /
// reset_peak_memory_stats, for every device type, the CPU included).
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

}  // namespace smelt
