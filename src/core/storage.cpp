#include "core/storage.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "smelt/error.h"

namespace smelt {

namespace {
std::atomic<uint64_t> g_serial{1};
}  // namespace

Storage::Storage() : serial_(g_serial++) {}
uint64_t Storage::next_serial() { return g_serial.load(); }

std::shared_ptr<Storage> Storage::allocate(size_t nbytes, Device device) {
  SMELT_CHECK(device.is_cpu(),
              "allocate: device {} has no eager backend yet; move the tensor to 'cpu'",
              device.str());
  auto s = std::shared_ptr<Storage>(new Storage());
  size_t rounded = (nbytes + 63) / 64 * 64;
  if (rounded == 0) rounded = 64;
  void* p = std::aligned_alloc(64, rounded);
  SMELT_CHECK(p != nullptr, "allocate: out of memory allocating {} bytes", nbytes);
  s->data_ = p;
  s->nbytes_ = nbytes;
  s->device_ = device;
  s->deleter_ = [](void* q) { std::free(q); };
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
