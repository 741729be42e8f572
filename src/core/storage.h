// Storage: a reference-counted byte buffer on a device, or, while tracing, a
// placeholder that names the graph value currently held by that memory.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "smelt/device.h"

namespace smelt {
class Allocator;
namespace detail {
/// Opaque to the core: the compiler's tracer subclasses it. A Storage with a
/// TraceValue holds no data; views of it share it like views share data.
struct TraceValue {
  virtual ~TraceValue() = default;
};

/// Throws the GraphBreak of `op` ("item()", "to_vector()", "data_ptr()"), a
/// call that reads tensor values, which tracers do not have; `advice` says how
/// to keep the read out of the compiled function.
[[noreturn]] void throw_value_read_while_tracing(const std::string& op, const std::string& advice);
}  // namespace detail

class Storage {
 public:
  /// Allocates `nbytes` (64-byte aligned) on `device` through the allocator its
  /// backend registered (core/allocator.h); Error when that device has no backend.
  static std::shared_ptr<Storage> allocate(size_t nbytes, Device device);
  /// Allocates `nbytes` of page-locked host memory (a CPU storage) from a
  /// backend's pinned allocator (Backend::pinned_allocator); pinned() is true.
  static std::shared_ptr<Storage> allocate_pinned(size_t nbytes, Allocator& pinned);
  /// Wraps memory owned by the caller; `deleter` (may be empty) runs when released.
  static std::shared_ptr<Storage> wrap(void* data, size_t nbytes, Device device,
                                       std::function<void(void*)> deleter = {});
  /// A data-less storage standing for a traced value.
  static std::shared_ptr<Storage> tracer(size_t nbytes, Device device,
                                         std::shared_ptr<detail::TraceValue> value);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  /// Raw bytes; throws GraphBreak for a tracer storage.
  void* data() const;
  size_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }
  /// Page-locked host memory (allocate_pinned): copies to and from a GPU may
  /// be asynchronous.
  bool pinned() const { return pinned_; }
  bool is_tracer() const { return trace_ != nullptr; }
  /// Creation order of storages in this process (increasing): the compiler
  /// tells tensors captured from outside a traced function (older than the
  /// trace) from tensors the function created.
  uint64_t serial() const { return serial_; }
  /// The serial the next storage will get.
  static uint64_t next_serial();
  const std::shared_ptr<detail::TraceValue>& trace() const { return trace_; }
  /// Rebinds a tracer storage to a new value (functionalized in-place write),
  /// or swaps a real storage into/out of tracing (compile() does this for parameters).
  void set_trace(std::shared_ptr<detail::TraceValue> v) { trace_ = std::move(v); }

  /// PyTorch's version counter (`tensor._version`): every in-place write into
  /// this memory (copy_, the in-place ops, a compiled graph writing back into an
  /// argument) bumps it. It lives here because views and detach() share it with
  /// their base, as they share the memory. Autograd records it when it saves a
  /// tensor for backward and refuses to use the tensor once it has moved on.
  uint32_t version() const { return version_; }
  void bump_version() { ++version_; }

 private:
  struct Key {};  // only Storage's factories construct one (std::make_shared needs a public ctor)

 public:
  explicit Storage(Key);

 private:
  uint64_t serial_ = 0;
  void* data_ = nullptr;
  size_t nbytes_ = 0;
  Device device_;
  bool pinned_ = false;
  /// allocate / allocate_pinned: the allocator data_ goes back to (no
  /// std::function, whose state would be one more heap block per tensor).
  Allocator* allocator_ = nullptr;
  bool counted_ = false;                // counted in memory.h's per-device counters
  std::function<void(void*)> deleter_;  // wrap()'s
  std::shared_ptr<detail::TraceValue> trace_;
  uint32_t version_ = 0;
};

}  // namespace smelt
