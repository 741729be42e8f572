// The CUDA caching allocator (allocator.h).
#include "backend/cuda/allocator.h"

#include <fmt/format.h>

#include <array>
#include <mutex>
#include <set>
#include <unordered_map>
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device.h"
#include "core/tensor_impl.h"
#include "smelt/error.h"

namespace smelt::cuda::impl {

namespace {

constexpr size_t kMinBlockSize = 512;        // every request is rounded up to a multiple
constexpr size_t kSmallSize = 1 << 20;       // largest request served from the small pool
constexpr size_t kSmallBuffer = 2 << 20;     // segment size of the small pool
constexpr size_t kMinLargeAlloc = 10 << 20;  // requests below take a kLargeBuffer segment
constexpr size_t kLargeBuffer = 20 << 20;
constexpr size_t kRoundLarge = 2 << 20;  // larger segments are rounded to this

size_t round_size(size_t n) {
  return n < kMinBlockSize ? kMinBlockSize
                           : (n + kMinBlockSize - 1) / kMinBlockSize * kMinBlockSize;
}

size_t segment_size(size_t n) {
  if (n <= kSmallSize) return kSmallBuffer;
  if (n < kMinLargeAlloc) return kLargeBuffer;
  return (n + kRoundLarge - 1) / kRoundLarge * kRoundLarge;
}

struct Block {
  int device = 0;
  cudaStream_t stream = nullptr;
  size_t size = 0;
  char* ptr = nullptr;
  bool allocated = false;
  bool small = false;
  Block* prev = nullptr;  // neighbours within the segment
  Block* next = nullptr;
  std::vector<cudaStream_t> stream_uses;  // record_stream: other streams using it
  std::vector<cudaEvent_t> events;        // freed: recorded on stream_uses, pending
};

/// Free blocks ordered by (stream, size, address): lower_bound finds the
/// smallest cached block of a stream that fits.
struct BlockOrder {
  bool operator()(const Block* a, const Block* b) const {
    if (a->stream != b->stream) return a->stream < b->stream;
    if (a->size != b->size) return a->size < b->size;
    return a->ptr < b->ptr;
  }
};
using Pool = std::set<Block*, BlockOrder>;

struct DeviceState {
  Pool small, large;
  backend::MemoryStats stats;
};

}  // namespace

struct CachingAllocator::Impl {
  std::mutex mu;
  std::array<DeviceState, kMaxDevices> devices;
  std::unordered_map<void*, Block*> live;  // allocated blocks by address
  std::vector<Block*> pending;             // freed, waiting for events of other streams
  int captures_underway = 0;               // recordings of CUDA graphs in progress
  /// Streams of CUDA-graph recordings: their blocks are private pools, and
  /// the bytes of their segments.
  std::unordered_map<cudaStream_t, int64_t> private_pools;

  /// Returns freed blocks whose recorded streams have reached their events
  /// to their pools.
  void process_events() {
    std::vector<Block*> still;
    for (Block* b : pending) {
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
      if (b->events.empty()) {
        free_block(b);
      } else {
        still.push_back(b);
      }
    }
    pending = std::move(still);
  }

  Pool& pool_of(const Block* b) {
    DeviceState& d = devices[static_cast<size_t>(b->device)];
    return b->small ? d.small : d.large;
  }

  void note_allocated(DeviceState& d, int64_t delta) {
    d.stats.allocated += delta;
    if (d.stats.allocated > d.stats.peak_allocated) d.stats.peak_allocated = d.stats.allocated;
  }
  void note_reserved(DeviceState& d, int64_t delta) {
    d.stats.reserved += delta;
    if (d.stats.reserved > d.stats.peak_reserved) d.stats.peak_reserved = d.stats.reserved;
  }

  /// Releases every whole free segment of `device` (-1: of every device)
  /// that is in no private pool; nothing while a recording is under way.
  void release_cached(int device) {
    if (captures_underway > 0) return;
    release_segments(device, [&](const Block* b) { return private_pools.count(b->stream) == 0; });
  }

  /// Releases the whole free segments of `device` (-1: of every device) for
  /// which `pick` is true.
  template <class Pick>
  void release_segments(int device, const Pick& pick) {
    for (int dev = 0; dev < kMaxDevices; ++dev) {
      if (device >= 0 && dev != device) continue;
      DeviceState& d = devices[static_cast<size_t>(dev)];
      for (Pool* pool : {&d.small, &d.large}) {
        std::vector<Block*> whole;
        for (Block* b : *pool)
          if (b->prev == nullptr && b->next == nullptr && pick(b)) whole.push_back(b);
        if (whole.empty()) continue;
        DeviceGuard guard(dev);
        for (Block* b : whole) {
          pool->erase(b);
          SMELT_CUDA_CHECK(cudaFree(b->ptr));
          ++d.stats.device_frees;
          note_reserved(d, -static_cast<int64_t>(b->size));
          delete b;
        }
      }
    }
  }

  /// A fresh segment of `size` bytes, or nullptr when the device is out of memory.
  char* device_malloc(size_t size) {
    void* p = nullptr;
    // Allowed while this thread records a CUDA graph: the allocation is not
    // part of the recording (its memory is the recording's private pool).
    cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    SMELT_CUDA_CHECK(cudaThreadExchangeStreamCaptureMode(&mode));
    const cudaError_t err = cudaMalloc(&p, size);
    SMELT_CUDA_CHECK(cudaThreadExchangeStreamCaptureMode(&mode));
    if (err == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();  // not sticky: clear it
      return nullptr;
    }
    SMELT_CUDA_CHECK(err);
    return static_cast<char*>(p);
  }

  void* allocate(size_t nbytes, int device, cudaStream_t stream) {
    const size_t size = round_size(nbytes);
    const bool small = size <= kSmallSize;
    std::lock_guard<std::mutex> lock(mu);
    // No event may be queried while a recording is under way.
    if (!pending.empty() && captures_underway == 0) process_events();
    DeviceState& d = devices[static_cast<size_t>(device)];
    Pool& pool = small ? d.small : d.large;

    Block key;
    key.stream = stream;
    key.size = size;
    Block* block = nullptr;
    auto it = pool.lower_bound(&key);
    if (it != pool.end() && (*it)->stream == stream) {
      block = *it;
      pool.erase(it);
    } else {
      const size_t seg = segment_size(size);
      DeviceGuard guard(device);
      char* p = device_malloc(seg);
      if (p == nullptr) {
        ++d.stats.alloc_retries;
        release_cached(device);
        p = device_malloc(seg);
      }
      if (p == nullptr) {
        ++d.stats.ooms;
        size_t free_b = 0, total_b = 0;
        (void)cudaMemGetInfo(&free_b, &total_b);
        (void)cudaGetLastError();
        throw OutOfMemoryError(fmt::format(
            "CUDA out of memory: tried to allocate {} on cuda:{}; smelt has {} allocated in "
            "tensors and {} reserved in all; the device has {} free of {}",
            detail::bytes_str(static_cast<int64_t>(nbytes)), device,
            detail::bytes_str(d.stats.allocated), detail::bytes_str(d.stats.reserved),
            detail::bytes_str(static_cast<int64_t>(free_b)),
            detail::bytes_str(static_cast<int64_t>(total_b))));
      }
      ++d.stats.device_allocs;
      note_reserved(d, static_cast<int64_t>(seg));
      if (auto pool_it = private_pools.find(stream); pool_it != private_pools.end())
        pool_it->second += static_cast<int64_t>(seg);
      block = new Block;
      block->device = device;
      block->stream = stream;
      block->size = seg;
      block->ptr = p;
      block->small = small;
    }
    // Split off the rest when it is worth keeping.
    const size_t rest = block->size - size;
    if ((small && rest >= kMinBlockSize) || (!small && rest > kSmallSize)) {
      Block* r = new Block(*block);
      r->ptr = block->ptr + size;
      r->size = rest;
      r->prev = block;
      r->next = block->next;
      if (r->next) r->next->prev = r;
      block->next = r;
      block->size = size;
      pool.insert(r);
    }
    block->allocated = true;
    live.emplace(block->ptr, block);
    note_allocated(d, static_cast<int64_t>(block->size));
    return block->ptr;
  }

  void deallocate(void* p) {
    std::lock_guard<std::mutex> lock(mu);
    auto it = live.find(p);
    SMELT_INTERNAL_ASSERT(it != live.end(), "CUDA allocator: freeing {} which it did not allocate",
                          p);
    Block* b = it->second;
    live.erase(it);
    DeviceState& d = devices[static_cast<size_t>(b->device)];
    note_allocated(d, -static_cast<int64_t>(b->size));
    if (!b->stream_uses.empty()) {  // reused once the other streams' work has run
      DeviceGuard guard(b->device);
      for (cudaStream_t s : b->stream_uses) {
        cudaEvent_t e = nullptr;
        SMELT_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
        SMELT_CUDA_CHECK(cudaEventRecord(e, s));
        b->events.push_back(e);
      }
      b->stream_uses.clear();
      pending.push_back(b);
      return;
    }
    free_block(b);
  }

  void record_stream(void* p, cudaStream_t stream) {
    std::lock_guard<std::mutex> lock(mu);
    auto it = live.find(p);
    if (it == live.end()) return;  // memory it does not own (from_blob): never reused by it
    Block* b = it->second;
    if (stream == b->stream) return;
    for (cudaStream_t s : b->stream_uses)
      if (s == stream) return;
    b->stream_uses.push_back(stream);
  }

  /// Puts a block no tensor uses back in its pool, merged with free neighbours.
  void free_block(Block* b) {
    b->allocated = false;
    Pool& pool = pool_of(b);
    // Merge with free neighbours of the segment.
    for (Block* n : {b->prev, b->next}) {
      if (n == nullptr || n->allocated) continue;
      pool.erase(n);
      if (n == b->prev) {
        b->ptr = n->ptr;
        b->prev = n->prev;
        if (b->prev) b->prev->next = b;
      } else {
        b->next = n->next;
        if (b->next) b->next->prev = b;
      }
      b->size += n->size;
      delete n;
    }
    pool.insert(b);
  }
};

CachingAllocator::CachingAllocator() : impl_(new Impl) {}
CachingAllocator::~CachingAllocator() { delete impl_; }

void* CachingAllocator::allocate(size_t nbytes, Device device) {
  require_device(device, "allocate");
  return impl_->allocate(nbytes, device.index, current_stream(device.index));
}

void CachingAllocator::deallocate(void* p, Device) { impl_->deallocate(p); }

void CachingAllocator::record_stream(void* p, cudaStream_t stream) {
  impl_->record_stream(p, stream);
}

void CachingAllocator::begin_capture(cudaStream_t stream) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  ++impl_->captures_underway;
  impl_->private_pools.emplace(stream, 0);
}

void CachingAllocator::end_capture(cudaStream_t) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  --impl_->captures_underway;
}

int64_t CachingAllocator::pool_bytes(cudaStream_t stream) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  auto it = impl_->private_pools.find(stream);
  return it == impl_->private_pools.end() ? 0 : it->second;
}

void CachingAllocator::release_pool(cudaStream_t stream) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (impl_->private_pools.erase(stream) == 0) return;
  // Blocks still allocated (none, unless a tensor made while recording
  // escaped it) keep their segments, which return to the device with
  // empty_cache once freed.
  if (impl_->captures_underway == 0)
    impl_->release_segments(-1, [&](const Block* b) { return b->stream == stream; });
}

backend::MemoryStats CachingAllocator::stats(int device) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->devices[static_cast<size_t>(device)].stats;
}

void CachingAllocator::reset_peak(int device) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  backend::MemoryStats& s = impl_->devices[static_cast<size_t>(device)].stats;
  s.peak_allocated = s.allocated;
  s.peak_reserved = s.reserved;
}

void CachingAllocator::empty_cache() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->process_events();
  impl_->release_cached(-1);
}

}  // namespace smelt::cuda::impl
