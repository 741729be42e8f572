// Storage (core/storage.h), and the per-device counters of smelt/memory.h,
// kept where storages are allocated and released.
#include "core/storage.h"

#include <algorithm>
#include <atomic>

#include "core/allocator.h"
#include "smelt/error.h"
#include "smelt/memory.h"

namespace smelt {

namespace {
std::atomic<uint64_t> g_serial{1};

/// memory.h's counters, per device type and index (indices past kMaxIndex share the last).
constexpr int kMaxIndex = 63;
struct MemoryCounter {
  std::atomic<int64_t> allocated{0}, peak{0};
};
MemoryCounter& counter(Device d) {
  static MemoryCounter counters[2][kMaxIndex + 1];
  return counters[d.type == DeviceType::CUDA][std::clamp(d.index, 0, kMaxIndex)];
}
void count_allocation(Device d, int64_t bytes) {
  MemoryCounter& c = counter(d);
  const int64_t now = c.allocated.fetch_add(bytes) + bytes;
  int64_t peak = c.peak.load();
  while (now > peak && !c.peak.compare_exchange_weak(peak, now)) {
  }
}
}  // namespace

int64_t memory_allocated(Device device) { return counter(device).allocated.load(); }
int64_t max_memory_allocated(Device device) { return counter(device).peak.load(); }
void reset_peak_memory_stats(Device device) {
  MemoryCounter& c = counter(device);
  c.peak.store(c.allocated.load());
}

Storage::Storage(Key) : serial_(g_serial++) {}
uint64_t Storage::next_serial() { return g_serial.load(); }

// One heap block per storage (std::make_shared): a tensor op's output costs
// one allocation here besides its memory.
std::shared_ptr<Storage> Storage::allocate(size_t nbytes, Device device) {
  Allocator& a = allocator_for(device);
  auto s = std::make_shared<Storage>(Key{});
  s->data_ = a.allocate(nbytes == 0 ? 1 : nbytes, device);
  s->nbytes_ = nbytes;
  s->device_ = device;
  s->allocator_ = &a;
  s->counted_ = true;
  count_allocation(device, static_cast<int64_t>(nbytes));
  return s;
}

std::shared_ptr<Storage> Storage::allocate_pinned(size_t nbytes, Allocator& pinned) {
  auto s = std::make_shared<Storage>(Key{});
  s->data_ = pinned.allocate(nbytes == 0 ? 1 : nbytes, Device());
  s->nbytes_ = nbytes;
  s->device_ = Device();
  s->pinned_ = true;
  s->allocator_ = &pinned;
  return s;
}

std::shared_ptr<Storage> Storage::wrap(void* data, size_t nbytes, Device device,
                                       std::function<void(void*)> deleter) {
  auto s = std::make_shared<Storage>(Key{});
  s->data_ = data;
  s->nbytes_ = nbytes;
  s->device_ = device;
  s->deleter_ = std::move(deleter);
  return s;
}

std::shared_ptr<Storage> Storage::tracer(size_t nbytes, Device device,
                                         std::shared_ptr<detail::TraceValue> value) {
  auto s = std::make_shared<Storage>(Key{});
  s->nbytes_ = nbytes;
  s->device_ = device;
  s->trace_ = std::move(value);
  return s;
}

namespace detail {
void throw_value_read_while_tracing(const std::string& op, const std::string& advice) {
  throw GraphBreak(op,
                   "reads tensor values, which do not exist while smelt::compile traces the "
                   "function (tracers have shapes and dtypes only)",
                   advice);
}
}  // namespace detail

Storage::~Storage() {
  if (data_ == nullptr) return;
  if (allocator_ != nullptr) {
    allocator_->deallocate(data_, device_);
    if (counted_) count_allocation(device_, -static_cast<int64_t>(nbytes_));
  } else if (deleter_) {
    deleter_(data_);
  }
}

void* Storage::data() const {
  if (trace_) {
    detail::throw_value_read_while_tracing(
        "a read of tensor values",
        "keep the code that reads values (item(), to_vector(), data_ptr(), printing) outside the "
        "compiled function");
  }
  return data_;
}

}  // namespace smelt
