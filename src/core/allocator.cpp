// The allocator registry (see allocator.h): one slot per DeviceType.
#include "core/allocator.h"

#include <array>
#include <atomic>

#include "smelt/error.h"

namespace smelt {

namespace {
constexpr size_t kDeviceTypes = 2;  // CPU, CUDA
std::array<std::atomic<Allocator*>, kDeviceTypes>& slots() {
  static std::array<std::atomic<Allocator*>, kDeviceTypes> s{};
  return s;
}
}  // namespace

void register_allocator(DeviceType type, Allocator* allocator) {
  slots()[static_cast<size_t>(type)].store(allocator);
}

Allocator& allocator_for(Device device) {
  Allocator* a = slots()[static_cast<size_t>(device.type)].load();
  SMELT_CHECK(a != nullptr, "allocate: no backend for device {}{}; move the tensor to 'cpu'",
              device.str(), device.is_cuda() ? " (smelt was built without CUDA)" : "");
  return *a;
}

}  // namespace smelt
