// Philox4x32-10 and the global generator (manual_seed). See random.h for the
// design; the random ops (rand, randn, randint, bernoulli_mask) are in
// src/ops/random_ops.cpp.
#include "core/random.h"

#include "kernels/random_ops.h"

#include <algorithm>
#include <cmath>
#include <utility>

namespace smelt {
namespace detail {

void Philox4x32::block(const uint32_t ctr_in[4], uint64_t key, uint32_t out[4]) {
  random::philox4x32(ctr_in, key, out);
}

void Generator::set_seed(uint64_t seed) {
  seed_ = seed;
  counter_ = 0;
  used_ = 4;
  has_normal_ = false;
}

void Generator::block_at(uint64_t seed, uint64_t index, uint32_t out[4]) {
  random::philox_block(seed, index, out);
}

uint64_t Generator::reserve(uint64_t nblocks) {
  used_ = 4;
  has_normal_ = false;
  uint64_t first = counter_;
  counter_ += nblocks;
  return first;
}

uint32_t Generator::next_u32() {
  if (used_ == 4) {
    block_at(seed_, counter_, block_);
    ++counter_;
    used_ = 0;
  }
  return block_[used_++];
}

uint64_t Generator::next_u64() {
  uint64_t lo = next_u32();
  uint64_t hi = next_u32();
  return (hi << 32) | lo;
}

double Generator::next_uniform() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }

double Generator::next_normal() {
  if (has_normal_) {
    has_normal_ = false;
    return normal_;
  }
  // Box-Muller: u1 in (0, 1] so that log(u1) is finite.
  double u1 = 1.0 - next_uniform();
  double u2 = next_uniform();
  double r = std::sqrt(-2.0 * std::log(u1));
  double theta = 2.0 * 3.14159265358979323846 * u2;
  normal_ = r * std::sin(theta);
  has_normal_ = true;
  return r * std::cos(theta);
}

Generator& default_generator() {
  static Generator gen;
  return gen;
}

uint64_t next_u64() {
  Generator& g = default_generator();
  std::lock_guard<std::mutex> lock(g.mutex());
  return g.next_u64();
}

double next_uniform() {
  Generator& g = default_generator();
  std::lock_guard<std::mutex> lock(g.mutex());
  return g.next_uniform();
}

}  // namespace detail
}  // namespace smelt
