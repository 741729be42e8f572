// Philox4x32-10 and the global generator (manual_seed). See random.h for the
// design; the random ops (rand, randn, randint, bernoulli_mask) are in
// src/ops/random_ops.cpp.
#include "core/random.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

namespace smelt {
namespace detail {

namespace {
constexpr uint32_t kPhiloxM0 = 0xD2511F53u;
constexpr uint32_t kPhiloxM1 = 0xCD9E8D57u;
constexpr uint32_t kPhiloxW0 = 0x9E3779B9u;  // golden ratio
constexpr uint32_t kPhiloxW1 = 0xBB67AE85u;  // sqrt(3) - 1
inline void mulhilo(uint32_t a, uint32_t b, uint32_t& hi, uint32_t& lo) {
  uint64_t p = static_cast<uint64_t>(a) * b;
  hi = static_cast<uint32_t>(p >> 32);
  lo = static_cast<uint32_t>(p);
}
}  // namespace

void Philox4x32::round(uint32_t ctr[4], const uint32_t key[2]) {
  uint32_t hi0, lo0, hi1, lo1;
  mulhilo(kPhiloxM0, ctr[0], hi0, lo0);
  mulhilo(kPhiloxM1, ctr[2], hi1, lo1);
  uint32_t out[4] = {hi1 ^ ctr[1] ^ key[0], lo1, hi0 ^ ctr[3] ^ key[1], lo0};
  std::memcpy(ctr, out, sizeof(out));
}

void Philox4x32::block(const uint32_t ctr_in[4], uint64_t key64, uint32_t out[4]) {
  uint32_t ctr[4] = {ctr_in[0], ctr_in[1], ctr_in[2], ctr_in[3]};
  uint32_t key[2] = {static_cast<uint32_t>(key64), static_cast<uint32_t>(key64 >> 32)};
  for (int r = 0; r < 10; ++r) {
    if (r > 0) {
      key[0] += kPhiloxW0;
      key[1] += kPhiloxW1;
    }
    round(ctr, key);
  }
  std::memcpy(out, ctr, sizeof(ctr));
}

void Generator::set_seed(uint64_t seed) {
  seed_ = seed;
  counter_ = 0;
  used_ = 4;
  has_normal_ = false;
}

void Generator::block_at(uint64_t seed, uint64_t index, uint32_t out[4]) {
  uint32_t ctr[4] = {static_cast<uint32_t>(index), static_cast<uint32_t>(index >> 32), 0, 0};
  Philox4x32::block(ctr, seed, out);
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
