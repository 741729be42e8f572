// smelt/memory.h's allocator-cache functions (memory_reserved, empty_cache)
// over the backend registry; the counters of memory_allocated live with
// Storage (src/core/storage.cpp).
#include "backend/backend.h"
#include "smelt/error.h"
#include "smelt/memory.h"

namespace smelt {

namespace {

backend::Backend& backend_of(Device device, const char* what) {
  backend::Backend* be = backend::find_backend(device.type);
  SMELT_CHECK(be != nullptr, "smelt::{}: no backend for device {}{}", what, device.str(),
              device.is_cuda() ? " (smelt was built without CUDA)" : "");
  return *be;
}

}  // namespace

int64_t memory_reserved(Device device) {
  return backend_of(device, "memory_reserved").memory_stats(device).reserved;
}

void empty_cache(Device device) { backend_of(device, "empty_cache").empty_cache(); }

}  // namespace smelt
