// The CPU backend's host memory: a caching allocator for large blocks. A
// tensor of 64 MiB freshly obtained from the kernel costs a page fault per
// 4 KiB page on first write (zeroing included), which on a 2-core machine
// takes longer than the kernel that writes it; every eager op and compiled
// call that makes a large output would pay that again. So, as PyTorch's CUDA
// caching allocator does for device memory (and jemalloc or tcmalloc for the
// heap), freed large blocks are kept and handed out again:
//   - requests under kLargeBlock (1 MiB) come from malloc (64-byte aligned),
//     whose own free lists serve them;
//   - larger ones are rounded up to a multiple of kHugePage (2 MiB), mapped
//     2 MiB-aligned with mmap and advised MADV_HUGEPAGE (as PyTorch's CPU
//     allocator does under THP_MEM_ALLOC_ENABLE=1: a fault then maps 2 MiB,
//     and streaming kernels miss the TLB less);
//   - a freed large block goes to the cache; an allocation of the same
//     rounded size takes the most recently freed one (its pages are mapped
//     and likely still in cache), otherwise maps a new block. A block is in
//     the cache only after its one owner (a Storage) released it, so a live
//     block is never handed out twice;
//   - the cache holds at most `cap` bytes: a block that would push it past
//     the cap evicts the oldest cached blocks (munmap); a block larger than
//     the cap is unmapped at once. The cap comes from SMELT_CPU_CACHE_BYTES
//     (bytes, with an optional K, M or G suffix; 0 turns caching off),
//     default 1/8 of the machine's physical memory;
//   - a failed mmap empties the cache and retries once before raising
//     smelt::OutOfMemoryError; empty_cache() unmaps every cached block.
// Statistics (backend::MemoryStats) count the large blocks only.
#pragma once
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <vector>

#include "backend/backend.h"
#include "core/allocator.h"

namespace smelt::cpu {

class HostCachingAllocator final : public Allocator {
 public:
  /// Requests of at least this many bytes are large blocks (mapped, cached).
  static constexpr size_t kLargeBlock = size_t{1} << 20;
  /// Large blocks are multiples of this size, aligned to it.
  static constexpr size_t kHugePage = size_t{2} << 20;

  /// An allocator whose cache holds at most `cap_bytes` (0: no caching).
  explicit HostCachingAllocator(size_t cap_bytes);
  /// The CPU backend's: the cap is host_cache_cap_from_env(), read at the
  /// first large allocation (so that a malformed SMELT_CPU_CACHE_BYTES raises
  /// its Error there, not while the backend registers before main()).
  HostCachingAllocator();
  /// Unmaps the cached blocks (live blocks must have been released).
  ~HostCachingAllocator() override;
  HostCachingAllocator(const HostCachingAllocator&) = delete;
  HostCachingAllocator& operator=(const HostCachingAllocator&) = delete;

  /// `nbytes` bytes of host memory, 64-byte aligned (2 MiB for large blocks).
  /// Throws OutOfMemoryError when the system has none left.
  void* allocate(size_t nbytes, Device device) override;
  /// Returns `p` (from allocate()); a large block goes to the cache.
  void deallocate(void* p, Device device) override;

  /// Unmaps every cached block.
  void empty_cache();
  /// Bytes now cached (freed large blocks kept for reuse).
  size_t cached_bytes() const;
  /// The cap (reads the environment first where the constructor said so).
  size_t cap_bytes();
  /// allocated: bytes of live large blocks (rounded sizes); reserved: those
  /// plus the cache; device_allocs / device_frees: mmap / munmap calls;
  /// alloc_retries: failed mmaps retried after emptying the cache; ooms:
  /// allocations that failed after the retry.
  backend::MemoryStats stats() const;
  /// Sets the peaks of stats() to the current values.
  void reset_peaks();

 private:
  struct Cached {
    void* p;
    size_t bytes;
  };
  void* map_block(size_t bytes);
  void unmap_block(void* p, size_t bytes);
  void evict_until(size_t limit);  // unmaps the oldest cached blocks until cached <= limit
  void note_peaks();
  size_t cap_locked();  // cap_, read from the environment on first use

  std::optional<size_t> cap_;
  mutable std::mutex mu_;
  std::unordered_map<void*, size_t> live_;  // large blocks handed out: address -> bytes
  std::vector<Cached> cached_;              // freed large blocks, oldest first
  size_t cached_bytes_ = 0;
  backend::MemoryStats stats_;
};

/// The cache cap SMELT_CPU_CACHE_BYTES asks for: `env` (null or empty: unset)
/// as a whole number of bytes with an optional K, M or G suffix (powers of
/// 1024); unset: `default_bytes`. Error naming the variable for anything else.
size_t host_cache_cap(const char* env, size_t default_bytes);

/// The cap of the CPU backend's allocator: SMELT_CPU_CACHE_BYTES, default 1/8
/// of physical memory.
size_t host_cache_cap_from_env();

}  // namespace smelt::cpu
