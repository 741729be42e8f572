// The global random generator behind rand/randn/randint/dropout.
//
// Algorithm: Philox4x32-10, the counter-based generator of Salmon, Moraes, Dror
// and Shaw, "Parallel random numbers: as easy as 1, 2, 3" (SC 2011), the same
// family PyTorch uses on CUDA. State = a 64-bit key (the seed) and a 128-bit
// counter; each counter value yields four 32-bit words. manual_seed(s) sets the
// key to s and the counter to 0, so a seeded program draws the same numbers on
// every run and platform. The generator is shared by all threads (a mutex guards
// it). A tensor fill reserves one counter block per 4 words it needs and fills
// the blocks in parallel, so results do not depend on the thread count:
// rand (<= 32-bit floats) uses one word per element, rand float64 / randint two
// words (64 bits) per element, randn one block per pair of elements
// (Box-Muller on two 53-bit uniforms: cos for the even, sin for the odd element).
//
// The random ops (src/ops/random_ops.cpp) reserve blocks here and have the
// backend fill tensors from them (backend::RandomFill); each must call
// detail::note_random("<op>") first so that smelt::compile graph-breaks
// instead of baking random numbers into a graph.
#pragma once
#include <cstdint>
#include <mutex>

namespace smelt::detail {

/// Philox4x32-10 bijection of (counter, key): four 32-bit outputs
/// (random::philox4x32 of src/kernels/random_ops.h, shared with the devices).
struct Philox4x32 {
  /// Output block for counter `ctr` (128 bits, little-endian words) and `key`.
  static void block(const uint32_t ctr_in[4], uint64_t key, uint32_t out[4]);
};

/// The process-wide generator. Use the free functions below in ops; lock() is
/// for drawing many numbers in one critical section.
class Generator {
 public:
  explicit Generator(uint64_t seed = 67280421310721ULL) { set_seed(seed); }
  void set_seed(uint64_t seed);
  uint64_t seed() const { return seed_; }
  /// Next 32 random bits (consumes one word of the current 4-word block).
  uint32_t next_u32();
  /// Next 64 random bits (two 32-bit words).
  uint64_t next_u64();
  /// Uniform double in [0, 1) with 53 random bits.
  double next_uniform();
  /// Standard normal (Box-Muller on two uniforms; caches the second value).
  double next_normal();
  /// Reserves `nblocks` consecutive Philox counters and returns the first; the
  /// caller computes block b as Philox4x32::block({first + b, 0, 0, 0}, seed()).
  /// Tensor fills use this so that they run in parallel yet give the same
  /// numbers for any thread count. Discards any partially used block.
  uint64_t reserve(uint64_t nblocks);
  /// Block `index` of the stream keyed by `seed` (4 words).
  static void block_at(uint64_t seed, uint64_t index, uint32_t out[4]);
  std::mutex& mutex() { return mu_; }

 private:
  uint64_t seed_ = 0;
  uint64_t counter_ = 0;  // low 64 bits of the Philox counter (the high 64 stay 0)
  uint32_t block_[4] = {0, 0, 0, 0};
  int used_ = 4;  // words of block_ already consumed
  bool has_normal_ = false;
  double normal_ = 0.0;
  std::mutex mu_;
};

/// The global generator (seeded by smelt::manual_seed).
Generator& default_generator();

// ---- convenience API for ops (each call locks the global generator) --------
/// 64 random bits from the global generator.
uint64_t next_u64();
/// Uniform double in [0, 1) from the global generator.
double next_uniform();
}  // namespace smelt::detail
