// Philox4x32-10 global generator and the random factories (rand, randn,
// randint, manual_seed, bernoulli_mask). See random.h for the design.
#include "core/random.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

#include "backend/cpu/loops.h"
#include "core/tensor_impl.h"
#include "ops/dispatch.h"
#include "smelt/ops.h"

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

namespace {
void check_size(const char* op, const Shape& size) {
  for (auto d : size)
    SMELT_CHECK(d >= 0, "{}: negative dimension in size {}; every size must be >= 0", op,
                shape_str(size));
}
DType float_dtype(const char* op, const TensorOptions& opts) {
  DType t = opts.has_dtype ? opts.dtype_ : default_dtype();
  SMELT_CHECK(is_floating(t),
              "{}: dtype {} is not supported (floating dtypes only); pass a floating dtype or "
              "convert the result with .to(...)",
              op, dtype_name(t));
  return t;
}
/// Mantissa bits of a floating dtype (the uniform grid used so that values stay < 1).
int uniform_bits(DType t) {
  switch (t) {
    case DType::Float16:
      return 11;
    case DType::BFloat16:
      return 8;
    case DType::Float32:
      return 24;
    default:
      return 53;
  }
}
}  // namespace

namespace {
constexpr int64_t kRandomGrain = 1 << 14;

/// The Philox blocks one random op consumes: the seed and the first block index.
/// A named struct, not a pair: structured bindings cannot be captured by the
/// kernels' lambdas before Clang 16.
struct BlockRange {
  uint64_t seed;
  uint64_t first;
};

/// Reserves the blocks for `nblocks` under the generator lock.
BlockRange reserve_blocks(uint64_t nblocks) {
  Generator& g = default_generator();
  std::lock_guard<std::mutex> lock(g.mutex());
  return {g.seed(), g.reserve(nblocks)};
}

inline uint64_t words64(const uint32_t* w) { return (static_cast<uint64_t>(w[1]) << 32) | w[0]; }

/// Calls f(i, block) for every element i in parallel; block is the Philox
/// block holding element i's words (`per_block` elements per block).
template <class F>
void for_each_block(int64_t n, int64_t per_block, BlockRange blocks, const F& f) {
  const int64_t nblocks = (n + per_block - 1) / per_block;
#pragma omp parallel for schedule(static) if (n >= kRandomGrain)
  for (int64_t b = 0; b < nblocks; ++b) {
    uint32_t w[4];
    Generator::block_at(blocks.seed, blocks.first + static_cast<uint64_t>(b), w);
    const int64_t end = std::min(n, (b + 1) * per_block);
    for (int64_t i = b * per_block; i < end; ++i) f(i, w);
  }
}
}  // namespace

Tensor bernoulli_mask(const Shape& shape, double keep_prob) {
  note_random("bernoulli");
  check_size("bernoulli", shape);
  SMELT_CHECK(keep_prob >= 0.0 && keep_prob <= 1.0,
              "bernoulli: probability must be in [0, 1], got {}", keep_prob);
  Tensor out = make_empty(shape, DType::Bool, Device());
  bool* p = out.data_ptr<bool>();
  const int64_t n = out.numel();
  const auto blocks = reserve_blocks((n + 1) / 2);
  for_each_block(n, 2, blocks, [&](int64_t i, const uint32_t* w) {
    double u = static_cast<double>(words64(w + 2 * (i % 2)) >> 11) * 0x1.0p-53;
    p[i] = u < keep_prob;
  });
  return out;
}

}  // namespace detail

void manual_seed(uint64_t seed) {
  detail::Generator& g = detail::default_generator();
  std::lock_guard<std::mutex> lock(g.mutex());
  g.set_seed(seed);
}

Tensor rand(const Shape& size, TensorOptions opts) {
  detail::note_random("rand");
  detail::check_size("rand", size);
  DType dt = detail::float_dtype("rand", opts);
  Tensor out = detail::make_empty(size, dt, opts.device_);
  const int64_t n = out.numel();
  const int bits = detail::uniform_bits(dt);
  const double scale = std::ldexp(1.0, -bits);
  const int64_t per_block = bits > 32 ? 2 : 4;
  const auto blocks = detail::reserve_blocks((n + per_block - 1) / per_block);
  SMELT_DISPATCH_ALL(dt, "rand", [&] {
    if constexpr (std::is_same_v<T, double> || std::is_same_v<T, float> ||
                  std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
      T* p = out.data_ptr<T>();
      detail::for_each_block(n, per_block, blocks, [&](int64_t i, const uint32_t* w) {
        uint64_t r = per_block == 2 ? detail::words64(w + 2 * (i % 2))
                                    : static_cast<uint64_t>(w[i % 4]) << 32;
        double u = static_cast<double>(r >> (64 - bits)) * scale;  // exact in T, < 1
        if constexpr (std::is_same_v<T, double>) {
          p[i] = u;
        } else {
          p[i] = static_cast<T>(static_cast<float>(u));
        }
      });
    }
  });
  return out;
}

Tensor randn(const Shape& size, TensorOptions opts) {
  detail::note_random("randn");
  detail::check_size("randn", size);
  DType dt = detail::float_dtype("randn", opts);
  Tensor out = detail::make_empty(size, dt, opts.device_);
  const int64_t n = out.numel();
  const auto blocks = detail::reserve_blocks((n + 1) / 2);
  SMELT_DISPATCH_ALL(dt, "randn", [&] {
    if constexpr (std::is_same_v<T, double> || std::is_same_v<T, float> ||
                  std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
      T* p = out.data_ptr<T>();
      detail::for_each_block(n, 2, blocks, [&](int64_t i, const uint32_t* w) {
        // Box-Muller: u1 in (0, 1] so that log(u1) is finite.
        double u1 = 1.0 - static_cast<double>(detail::words64(w) >> 11) * 0x1.0p-53;
        double u2 = static_cast<double>(detail::words64(w + 2) >> 11) * 0x1.0p-53;
        double r = std::sqrt(-2.0 * std::log(u1));
        double theta = 2.0 * 3.14159265358979323846 * u2;
        double z = i % 2 == 0 ? r * std::cos(theta) : r * std::sin(theta);
        if constexpr (std::is_same_v<T, double>) {
          p[i] = z;
        } else {
          p[i] = static_cast<T>(static_cast<float>(z));
        }
      });
    }
  });
  return out;
}

Tensor randint(int64_t low, int64_t high, const Shape& size, TensorOptions opts) {
  detail::note_random("randint");
  detail::check_size("randint", size);
  SMELT_CHECK(low < high,
              "randint: random_ expects 'from' to be less than 'to', but got from={} >= to={}; "
              "pass low < high (values are drawn from [low, high))",
              low, high);
  DType dt = opts.has_dtype ? opts.dtype_ : DType::Int64;
  Tensor out = detail::make_empty(size, dt, opts.device_);
  const int64_t n = out.numel();
  // high - low may overflow int64; the range fits in uint64.
  const uint64_t range = static_cast<uint64_t>(high) - static_cast<uint64_t>(low);
  const auto blocks = detail::reserve_blocks((n + 1) / 2);
  SMELT_DISPATCH_ALL(dt, "randint", [&] {
    T* p = out.data_ptr<T>();
    detail::for_each_block(n, 2, blocks, [&](int64_t i, const uint32_t* w) {
      // Modulo reduction: bias <= range / 2^64, negligible for tensor sizes.
      uint64_t r = detail::words64(w + 2 * (i % 2));
      int64_t v = static_cast<int64_t>(static_cast<uint64_t>(low) + r % range);
      if constexpr (std::is_same_v<T, bool>) {
        p[i] = v != 0;
      } else if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
        p[i] = T(static_cast<float>(v));
      } else {
        p[i] = static_cast<T>(v);
      }
    });
  });
  return out;
}

}  // namespace smelt
