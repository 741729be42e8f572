// The CUDA backend's pinned host memory (host_allocator.h).
#include "backend/cuda/host_allocator.h"

#include <fmt/format.h>

#include <iterator>
#include <map>
#include <mutex>
#include <set>
#include <utility>
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device.h"
#include "core/tensor_impl.h"
#include "smelt/error.h"

namespace smelt::cuda::impl {

namespace {

size_t round_pow2(size_t n) {
  size_t s = 512;
  while (s < n) s <<= 1;
  return s;
}

struct HostBlock {
  char* ptr = nullptr;
  size_t size = 0;
  bool allocated = false;
  std::vector<cudaEvent_t> events;  // copies queued on this block (not yet seen complete)
};

/// Drops the completed events of `b`; true when none is left.
bool events_done(HostBlock* b) {
  std::vector<cudaEvent_t> left;
  for (cudaEvent_t e : b->events) {
    const cudaError_t err = cudaEventQuery(e);
    if (err == cudaErrorNotReady) {
      (void)cudaGetLastError();
      left.push_back(e);
      continue;
    }
    SMELT_CUDA_CHECK(err);
    SMELT_CUDA_CHECK(cudaEventDestroy(e));
  }
  b->events = std::move(left);
  return b->events.empty();
}

}  // namespace

struct HostAllocator::Impl {
  std::mutex mu;
  std::map<char*, HostBlock*> blocks;            // every block, by address
  std::set<std::pair<size_t, char*>> free_list;  // cached blocks: (size, address)
  std::vector<HostBlock*> pending;               // freed, events not complete yet

  /// Moves pending blocks whose copies have run to the free list.
  void process_events() {
    std::vector<HostBlock*> still;
    for (HostBlock* b : pending) {
      if (events_done(b)) {
        free_list.insert({b->size, b->ptr});
      } else {
        still.push_back(b);
      }
    }
    pending = std::move(still);
  }

  HostBlock* find(const void* p) {
    auto it = blocks.upper_bound(const_cast<char*>(static_cast<const char*>(p)));
    if (it == blocks.begin()) return nullptr;
    HostBlock* b = std::prev(it)->second;
    return static_cast<const char*>(p) < b->ptr + b->size ? b : nullptr;
  }
};

HostAllocator::HostAllocator() : impl_(new Impl) {}
HostAllocator::~HostAllocator() { delete impl_; }

void* HostAllocator::allocate(size_t nbytes, Device) {
  require_device(Device(DeviceType::CUDA, 0), "pin_memory");
  const size_t size = round_pow2(nbytes);
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->process_events();
  auto it = impl_->free_list.lower_bound({size, nullptr});
  if (it != impl_->free_list.end() && it->first == size) {
    HostBlock* b = impl_->blocks.at(it->second);
    impl_->free_list.erase(it);
    b->allocated = true;
    return b->ptr;
  }
  void* p = nullptr;
  const cudaError_t err = cudaHostAlloc(&p, size, cudaHostAllocPortable);
  if (err == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();
    throw OutOfMemoryError(fmt::format(
        "pinned host memory exhausted: cudaHostAlloc of {} failed; pin fewer or smaller tensors",
        detail::bytes_str(static_cast<int64_t>(size))));
  }
  SMELT_CUDA_CHECK(err);
  auto* b = new HostBlock;
  b->ptr = static_cast<char*>(p);
  b->size = size;
  b->allocated = true;
  impl_->blocks.emplace(b->ptr, b);
  return b->ptr;
}

void HostAllocator::deallocate(void* p, Device) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  auto it = impl_->blocks.find(static_cast<char*>(p));
  SMELT_INTERNAL_ASSERT(it != impl_->blocks.end() && it->second->allocated,
                        "pinned allocator: freeing {} which it did not hand out", p);
  HostBlock* b = it->second;
  b->allocated = false;
  if (b->events.empty()) {
    impl_->free_list.insert({b->size, b->ptr});
  } else {
    impl_->pending.push_back(b);
  }
}

void HostAllocator::record_use(const void* p, int device, cudaStream_t stream) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  HostBlock* b = impl_->find(p);
  SMELT_INTERNAL_ASSERT(b != nullptr && b->allocated,
                        "pinned allocator: {} is not in a live pinned block", p);
  (void)events_done(b);  // prune what has run already
  DeviceGuard guard(device);
  cudaEvent_t e = nullptr;
  SMELT_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  SMELT_CUDA_CHECK(cudaEventRecord(e, stream));
  b->events.push_back(e);
}

void HostAllocator::empty_cache() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->process_events();
  for (const auto& [size, ptr] : impl_->free_list) {
    auto it = impl_->blocks.find(ptr);
    SMELT_CUDA_CHECK(cudaFreeHost(ptr));
    delete it->second;
    impl_->blocks.erase(it);
  }
  impl_->free_list.clear();
}

}  // namespace smelt::cuda::impl
