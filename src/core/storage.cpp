#include "core/storage.h"

#include <atomic>

#include "core/allocator.h"
#include "smelt/error.h"

namespace smelt {

namespace {
std::atomic<uint64_t> g_serial{1};
}  // namespace

Storage::Storage() : serial_(g_serial++) {}
uint64_t Storage::next_serial() { return g_serial.load(); }

std::shared_ptr<Storage> Storage::allocate(size_t nbytes, Device device) {
  Allocator& a = allocator_for(device);
  auto s = std::shared_ptr<Storage>(new Storage());
  s->data_ = a.allocate(nbytes == 0 ? 1 : nbytes, device);
  s->nbytes_ = nbytes;
  s->device_ = device;
  s->deleter_ = [&a, device](void* q) { a.deallocate(q, device); };
  return s;
}

std::shared_ptr<Storage> Storage::wrap(void* data, size_t nbytes, Device device,
                                       std::function<void(void*)> deleter) {
  auto s = std::shared_ptr<Storage>(new Storage());
  s->data_ = data;
  s->nbytes_ = nbytes;
  s->device_ = device;
  s->deleter_ = std::move(deleter);
  return s;
}

std::shared_ptr<Storage> Storage::tracer(size_t nbytes, Device device,
                                         std::shared_ptr<detail::TraceValue> value) {
  auto s = std::shared_ptr<Storage>(new Storage());
  s->nbytes_ = nbytes;
  s->device_ = device;
  s->trace_ = std::move(value);
  return s;
}

Storage::~Storage() {
  if (deleter_ && data_) deleter_(data_);
}

void* Storage::data() const {
  if (trace_) {
    throw GraphBreak(
        "data access: a tensor's values were read while tracing (item(), printing, "
        "data_ptr or an op without a lowering); this is a graph break");
  }
  return data_;
}

}  // namespace smelt
