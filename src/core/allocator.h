// The allocator registry: where core's Storage gets device memory. Each backend
// registers one Allocator for its DeviceType (src/backend/cpu registers host
// memory); core itself knows no backend. Asking for a device whose backend is
// not built in (CUDA today) raises a smelt::Error that says so.
#pragma once
#include <cstddef>

#include "smelt/device.h"

namespace smelt {

/// Raw memory of one device type. Implementations are thread-safe.
class Allocator {
 public:
  virtual ~Allocator() = default;
  /// `nbytes` (> 0) bytes on `device`, aligned to at least 64 bytes. Throws
  /// smelt::OutOfMemoryError when the memory cannot be had (make_empty adds
  /// the op, shape and dtype to the message).
  virtual void* allocate(size_t nbytes, Device device) = 0;
  /// Returns memory from allocate() on the same device.
  virtual void deallocate(void* p, Device device) = 0;
};

/// Installs `allocator` (not owned; must outlive every Storage) for `type`.
void register_allocator(DeviceType type, Allocator* allocator);

/// The allocator of `device`'s type. Throws smelt::Error naming the device (and
/// saying that smelt was built without CUDA, for CUDA) when none is registered.
Allocator& allocator_for(Device device);

}  // namespace smelt
