// HostCachingAllocator (allocator.h): malloc for small requests, mapped
// 2 MiB-aligned blocks for large ones, freed large blocks cached up to a cap.
#include "backend/cpu/allocator.h"

#include <fmt/format.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "core/tensor_impl.h"
#include "smelt/error.h"

namespace smelt::cpu {

namespace {

size_t round_up(size_t n, size_t m) { return (n + m - 1) / m * m; }

bool may_be_large(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % HostCachingAllocator::kHugePage == 0;
}

}  // namespace

HostCachingAllocator::HostCachingAllocator(size_t cap_bytes) : cap_(cap_bytes) {}
HostCachingAllocator::HostCachingAllocator() = default;

HostCachingAllocator::~HostCachingAllocator() { empty_cache(); }

void* HostCachingAllocator::map_block(size_t bytes) {
  // Map one huge page more than asked and trim both ends to a 2 MiB boundary.
  const size_t span = bytes + kHugePage;
  void* raw = mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return nullptr;
  const uintptr_t base = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t start = round_up(base, kHugePage);
  if (start > base) munmap(raw, start - base);
  const uintptr_t end = start + bytes;
  if (base + span > end) munmap(reinterpret_cast<void*>(end), base + span - end);
  void* p = reinterpret_cast<void*>(start);
  (void)madvise(p, bytes, MADV_HUGEPAGE);  // advice only: kernels without THP ignore it
  ++stats_.device_allocs;
  return p;
}

void HostCachingAllocator::unmap_block(void* p, size_t bytes) {
  const int rc = munmap(p, bytes);
  SMELT_INTERNAL_ASSERT(rc == 0, "host allocator: munmap of a {}-byte block at {} failed: {}",
                        bytes, p, std::strerror(errno));
  ++stats_.device_frees;
  stats_.reserved -= static_cast<int64_t>(bytes);
}

void HostCachingAllocator::evict_until(size_t limit) {
  size_t n = 0;
  while (cached_bytes_ > limit && n < cached_.size()) {
    unmap_block(cached_[n].p, cached_[n].bytes);
    cached_bytes_ -= cached_[n].bytes;
    ++n;
  }
  cached_.erase(cached_.begin(), cached_.begin() + static_cast<std::ptrdiff_t>(n));
}

size_t HostCachingAllocator::cap_locked() {
  if (!cap_) cap_ = host_cache_cap_from_env();
  return *cap_;
}

size_t HostCachingAllocator::cap_bytes() {
  std::lock_guard<std::mutex> lock(mu_);
  return cap_locked();
}

void HostCachingAllocator::note_peaks() {
  stats_.peak_allocated = std::max(stats_.peak_allocated, stats_.allocated);
  stats_.peak_reserved = std::max(stats_.peak_reserved, stats_.reserved);
}

void* HostCachingAllocator::allocate(size_t nbytes, Device) {
  if (nbytes < kLargeBlock) {
    void* p = std::aligned_alloc(64, nbytes == 0 ? 64 : round_up(nbytes, 64));
    if (p == nullptr)
      throw OutOfMemoryError(fmt::format("out of memory: {} of host memory could not be allocated",
                                         detail::bytes_str(static_cast<int64_t>(nbytes))));
    return p;
  }
  // No address space has 2^62 bytes; a request that large must not wrap the rounding below.
  if (nbytes > (size_t{1} << 62))
    throw OutOfMemoryError(fmt::format("out of memory: {} of host memory could not be mapped",
                                       detail::bytes_str(static_cast<int64_t>(nbytes >> 1) * 2)));
  const size_t bytes = round_up(nbytes, kHugePage);
  std::lock_guard<std::mutex> lock(mu_);
  (void)cap_locked();  // here, where its Error may be raised, before deallocate() needs it
  void* p = nullptr;
  // The most recently freed block of this size: its pages are the likeliest in cache.
  for (size_t i = cached_.size(); i-- > 0;) {
    if (cached_[i].bytes == bytes) {
      p = cached_[i].p;
      cached_.erase(cached_.begin() + static_cast<std::ptrdiff_t>(i));
      cached_bytes_ -= bytes;
      break;
    }
  }
  if (p == nullptr) {
    p = map_block(bytes);
    if (p == nullptr && !cached_.empty()) {
      ++stats_.alloc_retries;
      evict_until(0);
      p = map_block(bytes);
    }
    if (p == nullptr) {
      ++stats_.ooms;
      throw OutOfMemoryError(fmt::format(
          "out of memory: {} of host memory could not be mapped ({}); smelt holds {} in live "
          "blocks of 1 MiB or more",
          detail::bytes_str(static_cast<int64_t>(nbytes)), std::strerror(errno),
          detail::bytes_str(stats_.allocated)));
    }
    stats_.reserved += static_cast<int64_t>(bytes);
  }
  live_.emplace(p, bytes);
  stats_.allocated += static_cast<int64_t>(bytes);
  note_peaks();
  return p;
}

void HostCachingAllocator::deallocate(void* p, Device) {
  if (p == nullptr) return;
  if (may_be_large(p)) {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = live_.find(p); it != live_.end()) {
      const size_t bytes = it->second;
      live_.erase(it);
      stats_.allocated -= static_cast<int64_t>(bytes);
      const size_t cap = *cap_;  // read by the allocate() that made the block
      if (bytes > cap) {
        unmap_block(p, bytes);
        return;
      }
      evict_until(cap - bytes);
      cached_.push_back({p, bytes});
      cached_bytes_ += bytes;
      return;
    }
  }
  std::free(p);  // a small block (malloc's, which may happen to be 2 MiB-aligned)
}

void HostCachingAllocator::empty_cache() {
  std::lock_guard<std::mutex> lock(mu_);
  evict_until(0);
}

size_t HostCachingAllocator::cached_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return cached_bytes_;
}

backend::MemoryStats HostCachingAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void HostCachingAllocator::reset_peaks() {
  std::lock_guard<std::mutex> lock(mu_);
  stats_.peak_allocated = stats_.allocated;
  stats_.peak_reserved = stats_.reserved;
}

size_t host_cache_cap(const char* env, size_t default_bytes) {
  if (env == nullptr || *env == '\0') return default_bytes;
  errno = 0;
  char* end = nullptr;
  const unsigned long long n = std::strtoull(env, &end, 10);
  int shift = 0;
  if (end != env && *end != '\0' && end[1] == '\0') {
    switch (*end) {
      case 'K':
      case 'k':
        shift = 10;
        ++end;
        break;
      case 'M':
      case 'm':
        shift = 20;
        ++end;
        break;
      case 'G':
      case 'g':
        shift = 30;
        ++end;
        break;
      default:
        break;
    }
  }
  const bool ok =
      errno == 0 && end != env && *end == '\0' && env[0] != '-' && n <= (~0ULL >> shift);
  SMELT_CHECK(ok,
              "SMELT_CPU_CACHE_BYTES='{}' is not a size; set it to a whole number of bytes, "
              "optionally with a K, M or G suffix (0 turns the CPU allocator's cache off), or "
              "unset it for the default (1/8 of physical memory)",
              env);
  return static_cast<size_t>(n << shift);
}

size_t host_cache_cap_from_env() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  const size_t physical = pages > 0 && page > 0 ? static_cast<size_t>(pages) * page : 0;
  return host_cache_cap(std::getenv("SMELT_CPU_CACHE_BYTES"), physical / 8);
}

}  // namespace smelt::cpu
