// smelt/cuda.h over the backend registry: the CUDA backend when smelt was
// built with it (src/backend/cuda), an Error otherwise; the float32 matmul
// precision that GEMM backends read; Tensor::record_stream.
#include "smelt/cuda.h"

#include "backend/backend.h"
#include "core/tensor_impl.h"
#include "smelt/error.h"

namespace smelt {

void set_float32_matmul_precision(const std::string& precision) {
  backend::set_float32_matmul_precision(precision);
}
std::string get_float32_matmul_precision() { return backend::float32_matmul_precision(); }

namespace cuda {

namespace {

backend::Backend& require_cuda(const char* what) {
  backend::Backend* be = backend::find_backend(DeviceType::CUDA);
  SMELT_CHECK(be != nullptr,
              "smelt::cuda::{}: smelt was built without CUDA (configure with "
              "-DSMELT_CUDA=ON on a machine with the CUDA toolkit)",
              what);
  SMELT_CHECK(be->device_count() > 0,
              "smelt::cuda::{}: no CUDA device: this machine shows no GPU (or no usable driver); "
              "check nvidia-smi and CUDA_VISIBLE_DEVICES",
              what);
  return *be;
}

Device resolve(backend::Backend& be, int device, const char* what) {
  const int index = device < 0 ? be.current_device() : device;
  SMELT_CHECK(index < be.device_count(), "smelt::cuda::{}: device {} does not exist ({} visible)",
              what, index, be.device_count());
  return Device(DeviceType::CUDA, index);
}

backend::Stream raw(const Stream& s) { return {s.handle()}; }

}  // namespace

bool is_available() { return device_count() > 0; }

int device_count() {
  backend::Backend* be = backend::find_backend(DeviceType::CUDA);
  return be ? be->device_count() : 0;
}

int current_device() { return require_cuda("current_device").current_device(); }
void set_device(int index) { require_cuda("set_device").set_device(index); }

void synchronize(int device) {
  backend::Backend& be = require_cuda("synchronize");
  be.synchronize_device(resolve(be, device, "synchronize"));
}

MemoryStats memory_stats(int device) {
  backend::Backend& be = require_cuda("memory_stats");
  const backend::MemoryStats s = be.memory_stats(resolve(be, device, "memory_stats"));
  MemoryStats m;
  m.allocated = s.allocated;
  m.reserved = s.reserved;
  m.peak_allocated = s.peak_allocated;
  m.peak_reserved = s.peak_reserved;
  m.num_device_allocs = s.device_allocs;
  m.num_device_frees = s.device_frees;
  m.num_alloc_retries = s.alloc_retries;
  m.num_ooms = s.ooms;
  return m;
}

void reset_peak_memory_stats(int device) {
  backend::Backend& be = require_cuda("reset_peak_memory_stats");
  be.reset_peak_memory_stats(resolve(be, device, "reset_peak_memory_stats"));
}

void empty_cache() { require_cuda("empty_cache").empty_cache(); }

Stream Stream::create(int device) {
  backend::Backend& be = require_cuda("Stream::create");
  const Device d = resolve(be, device, "Stream::create");
  backend::Stream s = be.create_stream(d);
  return Stream(d, std::shared_ptr<void>(s.handle, [&be](void* h) {
                  if (h) be.destroy_stream({h});
                }));
}

Stream Stream::default_stream(int device) {
  backend::Backend& be = require_cuda("Stream::default_stream");
  return Stream(resolve(be, device, "Stream::default_stream"), nullptr);
}

void Stream::synchronize() const { require_cuda("Stream::synchronize").synchronize(raw(*this)); }

Stream current_stream(int device) {
  backend::Backend& be = require_cuda("current_stream");
  const Device d = resolve(be, device, "current_stream");
  // Not owned here: the stream belongs to whoever made it current.
  void* h = be.current_stream(d).handle;
  return Stream(d, h ? std::shared_ptr<void>(h, [](void*) {}) : nullptr);
}

void set_stream(const Stream& s) {
  require_cuda("set_stream").set_current_stream(s.device(), raw(s));
}

StreamGuard::StreamGuard(const Stream& s) : prev_(current_stream(s.device().index)) {
  set_stream(s);
}
StreamGuard::~StreamGuard() {
  backend::Backend* be = backend::find_backend(DeviceType::CUDA);
  if (be) be->set_current_stream(prev_.device(), raw(prev_));
}

Event::Event(bool enable_timing) {
  backend::Backend& be = require_cuda("Event");
  device_ = Device(DeviceType::CUDA, be.current_device());
  backend::Event e = be.create_event(enable_timing);
  handle_ = std::shared_ptr<void>(e.handle, [&be](void* h) {
    if (h) be.destroy_event({h});
  });
}

void Event::record() { record(current_stream(device_.index)); }

void Event::record(const Stream& s) {
  require_cuda("Event::record").record({handle_.get()}, raw(s));
}

void Event::synchronize() const {
  require_cuda("Event::synchronize").event_synchronize({handle_.get()});
}

bool Event::query() const { return require_cuda("Event::query").event_query({handle_.get()}); }

float Event::elapsed_time(const Event& end) const {
  return require_cuda("Event::elapsed_time").elapsed_ms({handle_.get()}, {end.handle_.get()});
}

}  // namespace cuda
}  // namespace smelt

namespace smelt {

void Tensor::record_stream(const cuda::Stream& stream) const {
  SMELT_CHECK(defined() && is_cuda(), "record_stream: expected a CUDA tensor, got {}",
              defined() ? "one on " + device().str() : std::string("an undefined tensor"));
  SMELT_CHECK(stream.device() == device(),
              "record_stream: the stream is on {} but the tensor on {}; record a stream of the "
              "tensor's device",
              stream.device().str(), device().str());
  if (is_tracer())
    detail::throw_value_read_while_tracing("record_stream()",
                                           "call record_stream outside the compiled function");
  backend::backend(device()).record_stream(storage()->data(), device(), {stream.handle()});
}

}  // namespace smelt
