// The CPU backend's caching host allocator (src/backend/cpu/allocator.h):
// freed large blocks come back for the same rounded size, a live block is
// never handed out twice, the cache stays under its cap and empty_cache
// releases it; SMELT_CPU_CACHE_BYTES's parsing; and, through tensors, that a
// reused block never aliases a live tensor's data.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "backend/cpu/allocator.h"
#include "smelt/memory.h"
#include "smelt/ops.h"
#include "test_util.h"

using namespace smelt;
using smelt::cpu::HostCachingAllocator;

namespace {

constexpr size_t kMiB = size_t{1} << 20;

bool aligned(const void* p, size_t a) { return reinterpret_cast<uintptr_t>(p) % a == 0; }

TEST(CpuAllocator, FreedLargeBlockIsReusedForTheSameSizeClass) {
  HostCachingAllocator a(64 * kMiB);
  void* p = a.allocate(5 * kMiB + 1, kCPU);  // rounded to 6 MiB
  EXPECT_TRUE(aligned(p, HostCachingAllocator::kHugePage));
  std::memset(p, 7, 5 * kMiB + 1);
  a.deallocate(p, kCPU);
  EXPECT_EQ(a.cached_bytes(), 6 * kMiB);
  void* q = a.allocate(6 * kMiB, kCPU);  // same 6 MiB class
  EXPECT_EQ(q, p);
  EXPECT_EQ(a.cached_bytes(), 0u);
  const backend::MemoryStats s = a.stats();
  EXPECT_EQ(s.device_allocs, 1);
  EXPECT_EQ(s.device_frees, 0);
  EXPECT_EQ(s.allocated, static_cast<int64_t>(6 * kMiB));
  EXPECT_EQ(s.reserved, static_cast<int64_t>(6 * kMiB));
  void* r = a.allocate(8 * kMiB, kCPU);  // another class: a new block
  EXPECT_NE(r, p);
  EXPECT_EQ(a.stats().device_allocs, 2);
  a.deallocate(q, kCPU);
  a.deallocate(r, kCPU);
  EXPECT_EQ(a.stats().allocated, 0);
  EXPECT_EQ(a.stats().reserved, static_cast<int64_t>(14 * kMiB));
}

TEST(CpuAllocator, LiveBlockIsNeverHandedOutTwice) {
  HostCachingAllocator a(64 * kMiB);
  void* p = a.allocate(2 * kMiB, kCPU);
  void* q = a.allocate(2 * kMiB, kCPU);  // p is live: q must be another block
  EXPECT_NE(p, q);
  a.deallocate(p, kCPU);
  void* r = a.allocate(2 * kMiB, kCPU);  // p is free now: it comes back
  EXPECT_EQ(r, p);
  void* s = a.allocate(2 * kMiB, kCPU);  // both p and q are live: a third block
  EXPECT_NE(s, p);
  EXPECT_NE(s, q);
  for (void* b : {q, r, s}) a.deallocate(b, kCPU);
  EXPECT_EQ(a.cached_bytes(), 6 * kMiB);
}

TEST(CpuAllocator, MostRecentlyFreedBlockOfTheClassComesFirst) {
  HostCachingAllocator a(64 * kMiB);
  void* p = a.allocate(2 * kMiB, kCPU);
  void* q = a.allocate(2 * kMiB, kCPU);
  a.deallocate(p, kCPU);
  a.deallocate(q, kCPU);
  EXPECT_EQ(a.allocate(2 * kMiB, kCPU), q);
  EXPECT_EQ(a.allocate(2 * kMiB, kCPU), p);
  a.deallocate(p, kCPU);
  a.deallocate(q, kCPU);
}

TEST(CpuAllocator, CacheStaysUnderItsCapEvictingTheOldest) {
  HostCachingAllocator a(8 * kMiB);
  void* b1 = a.allocate(4 * kMiB, kCPU);
  void* b2 = a.allocate(4 * kMiB, kCPU);
  void* b3 = a.allocate(4 * kMiB, kCPU);
  a.deallocate(b1, kCPU);
  a.deallocate(b2, kCPU);
  EXPECT_EQ(a.cached_bytes(), 8 * kMiB);
  EXPECT_EQ(a.stats().device_frees, 0);
  a.deallocate(b3, kCPU);  // over the cap: b1, the oldest, is unmapped
  EXPECT_EQ(a.cached_bytes(), 8 * kMiB);
  EXPECT_EQ(a.stats().device_frees, 1);
  EXPECT_EQ(a.stats().reserved, static_cast<int64_t>(8 * kMiB));
  EXPECT_EQ(a.allocate(4 * kMiB, kCPU), b3);  // newest first
  EXPECT_EQ(a.allocate(4 * kMiB, kCPU), b2);
  EXPECT_EQ(a.stats().device_allocs, 3);  // neither needed a new mapping
  a.deallocate(b2, kCPU);
  a.deallocate(b3, kCPU);
}

TEST(CpuAllocator, BlockLargerThanTheCapIsReleasedAtOnce) {
  HostCachingAllocator a(4 * kMiB);
  void* p = a.allocate(6 * kMiB, kCPU);
  a.deallocate(p, kCPU);
  EXPECT_EQ(a.cached_bytes(), 0u);
  EXPECT_EQ(a.stats().device_frees, 1);
  EXPECT_EQ(a.stats().reserved, 0);
}

TEST(CpuAllocator, CapZeroCachesNothing) {
  HostCachingAllocator a(0);
  void* p = a.allocate(2 * kMiB, kCPU);
  a.deallocate(p, kCPU);
  EXPECT_EQ(a.cached_bytes(), 0u);
  a.deallocate(a.allocate(2 * kMiB, kCPU), kCPU);
  const backend::MemoryStats s = a.stats();
  EXPECT_EQ(s.device_allocs, 2);
  EXPECT_EQ(s.device_frees, 2);
  EXPECT_EQ(s.reserved, 0);
}

TEST(CpuAllocator, EmptyCacheReleasesEveryCachedBlockAndKeepsLiveOnes) {
  HostCachingAllocator a(64 * kMiB);
  void* live = a.allocate(2 * kMiB, kCPU);
  std::memset(live, 3, 2 * kMiB);
  a.deallocate(a.allocate(2 * kMiB, kCPU), kCPU);
  a.deallocate(a.allocate(4 * kMiB, kCPU), kCPU);
  EXPECT_EQ(a.cached_bytes(), 6 * kMiB);
  a.reset_peaks();
  a.empty_cache();
  EXPECT_EQ(a.cached_bytes(), 0u);
  const backend::MemoryStats s = a.stats();
  EXPECT_EQ(s.reserved, static_cast<int64_t>(2 * kMiB));
  EXPECT_EQ(s.allocated, static_cast<int64_t>(2 * kMiB));
  EXPECT_EQ(s.peak_reserved, static_cast<int64_t>(8 * kMiB));
  EXPECT_EQ(s.device_frees, 2);
  EXPECT_EQ(static_cast<unsigned char*>(live)[2 * kMiB - 1], 3);  // untouched
  a.deallocate(live, kCPU);
}

TEST(CpuAllocator, SmallRequestsComeFromMallocUncached) {
  HostCachingAllocator a(64 * kMiB);
  for (size_t n : {size_t{0}, size_t{1}, size_t{100}, HostCachingAllocator::kLargeBlock - 1}) {
    void* p = a.allocate(n, kCPU);
    EXPECT_TRUE(aligned(p, 64)) << n;
    a.deallocate(p, kCPU);
  }
  EXPECT_EQ(a.cached_bytes(), 0u);
  EXPECT_EQ(a.stats().device_allocs, 0);
  void* p = a.allocate(HostCachingAllocator::kLargeBlock, kCPU);  // the first large size
  EXPECT_EQ(a.stats().allocated, static_cast<int64_t>(HostCachingAllocator::kHugePage));
  a.deallocate(p, kCPU);
}

TEST(CpuAllocator, ConcurrentUseNeverHandsOutALiveBlockTwice) {
  HostCachingAllocator a(32 * kMiB);
  constexpr int kThreads = 4, kRounds = 50;
  std::vector<std::vector<void*>> held(kThreads);
  int clashes = 0;
#pragma omp parallel num_threads(kThreads) reduction(+ : clashes)
  {
    const int t = omp_get_thread_num();
    for (int r = 0; r < kRounds; ++r) {
      void* p = a.allocate(((r + t) % 3 + 1) * kMiB, kCPU);
      auto* bytes = static_cast<unsigned char*>(p);
      bytes[0] = static_cast<unsigned char>(t);  // the owner's mark, checked before release
      bytes[kMiB - 1] = static_cast<unsigned char>(r);
      held[t].push_back(p);
      if (held[t].size() > 2) {
        auto* q = static_cast<unsigned char*>(held[t].front());
        const int want_r = r - 2;
        clashes += q[0] != t || q[kMiB - 1] != static_cast<unsigned char>(want_r);
        a.deallocate(q, kCPU);
        held[t].erase(held[t].begin());
      }
    }
  }
  EXPECT_EQ(clashes, 0);
  std::set<void*> distinct;
  for (auto& h : held)
    for (void* p : h) distinct.insert(p);
  EXPECT_EQ(distinct.size(), static_cast<size_t>(kThreads * 2));
  for (auto& h : held)
    for (void* p : h) a.deallocate(p, kCPU);
  EXPECT_EQ(a.stats().allocated, 0);
  EXPECT_LE(a.cached_bytes(), 32 * kMiB);
}

TEST(CpuAllocator, UnmappableRequestsRaiseOutOfMemoryAfterEmptyingTheCache) {
  HostCachingAllocator a(64 * kMiB);
  void* live = a.allocate(2 * kMiB, kCPU);
  std::memset(live, 5, 2 * kMiB);
  a.deallocate(a.allocate(4 * kMiB, kCPU), kCPU);
  EXPECT_EQ(a.cached_bytes(), 4 * kMiB);
  // 64 PiB: mmap refuses it, the cache is emptied and the mmap retried once.
  EXPECT_THROW(a.allocate(size_t{1} << 56, kCPU), OutOfMemoryError);
  EXPECT_EQ(a.cached_bytes(), 0u);
  EXPECT_EQ(a.stats().alloc_retries, 1);
  EXPECT_EQ(a.stats().ooms, 1);
  // A size that rounding up to 2 MiB would wrap around is refused before that.
  EXPECT_THROW(a.allocate(~size_t{0} - 100, kCPU), OutOfMemoryError);
  // The live block is untouched and the allocator keeps working.
  EXPECT_EQ(static_cast<unsigned char*>(live)[2 * kMiB - 1], 5);
  void* p = a.allocate(4 * kMiB, kCPU);
  EXPECT_NE(p, nullptr);
  a.deallocate(p, kCPU);
  a.deallocate(live, kCPU);
}

TEST(CpuAllocator, CacheCapFromTheEnvironment) {
  using smelt::cpu::host_cache_cap;
  EXPECT_EQ(host_cache_cap(nullptr, 123), 123u);
  EXPECT_EQ(host_cache_cap("", 123), 123u);
  EXPECT_EQ(host_cache_cap("0", 123), 0u);
  EXPECT_EQ(host_cache_cap("4096", 123), 4096u);
  EXPECT_EQ(host_cache_cap("3K", 123), 3u << 10);
  EXPECT_EQ(host_cache_cap("512M", 123), size_t{512} << 20);
  EXPECT_EQ(host_cache_cap("2g", 123), size_t{2} << 30);
  for (const char* bad : {"-1", "1.5G", "12MB", "G", "lots", "99999999999999999999"}) {
    const std::string msg = smelt_test::error_of([&] { (void)host_cache_cap(bad, 0); });
    EXPECT_NE(msg.find(std::string("SMELT_CPU_CACHE_BYTES='") + bad + "'"), std::string::npos)
        << msg;
    EXPECT_NE(msg.find("K, M or G"), std::string::npos) << msg;
  }
}

// Through tensors: an output that takes a freed block's memory leaves every live
// tensor's values as they were, and memory_reserved / empty_cache see the cache.
TEST(CpuAllocator, ReusedBlocksNeverAliasLiveTensors) {
  const int64_t n = 1 << 20;  // 4 MiB of float32
  empty_cache(kCPU);
  const int64_t reserved_before = memory_reserved(kCPU);
  Tensor keep = full({n}, 1.0f);
  Tensor b = full({n}, 2.0f);
  const void* b_data = b.data_ptr();
  b = Tensor();                // its block goes to the cache
  Tensor c = add(keep, keep);  // a 4 MiB output: may take b's block, never keep's
  EXPECT_NE(c.data_ptr(), keep.data_ptr());
  Tensor d = mul(keep, 3.0);
  EXPECT_NE(d.data_ptr(), c.data_ptr());
  EXPECT_NE(d.data_ptr(), keep.data_ptr());
  EXPECT_TRUE(c.data_ptr() == b_data || d.data_ptr() == b_data ||
              cpu::host_cache_cap_from_env() < static_cast<size_t>(4 * n));
  const std::vector<double> kv = smelt_test::vals(keep), cv = smelt_test::vals(c),
                            dv = smelt_test::vals(d);
  EXPECT_TRUE(std::all_of(kv.begin(), kv.end(), [](double v) { return v == 1.0; }));
  EXPECT_TRUE(std::all_of(cv.begin(), cv.end(), [](double v) { return v == 2.0; }));
  EXPECT_TRUE(std::all_of(dv.begin(), dv.end(), [](double v) { return v == 3.0; }));
  EXPECT_GE(memory_reserved(kCPU), reserved_before + 3 * 4 * n);
  c = Tensor();
  d = Tensor();
  empty_cache(kCPU);
  EXPECT_EQ(memory_reserved(kCPU), reserved_before + 4 * n);  // keep's block (a 2 MiB multiple)
}

}  // namespace
