// The random ops: manual_seed, rand, randn, randint and the dropout mask. Each
// reserves its Philox blocks from the global generator (core/random.h) under
// its lock, then has the device's backend fill the tensor from them
// (backend::RandomFill), so a seeded program draws the same numbers on every
// run, thread count and device.
#include "ops/random_ops.h"

#include <utility>

#include "backend/backend.h"
#include "core/random.h"
#include "core/tensor_impl.h"
#include "ops/dispatch.h"
#include "smelt/ops.h"

namespace smelt {

namespace {

void check_size(const char* op, const Shape& size) {
  for (auto d : size)
    SMELT_CHECK(d >= 0, "{}: negative dimension in size {}; every size must be >= 0", op,
                detail::shape_str(size));
}

DType float_dtype(const char* op, const TensorOptions& opts) {
  DType t = opts.has_dtype ? opts.dtype_ : default_dtype();
  SMELT_CHECK(is_floating(t),
              "{}: dtype {} is not supported (floating dtypes only); pass a floating dtype or "
              "convert the result with .to(...)",
              op, dtype_name(t));
  return t;
}

/// Fills `out` with `r` (kind and parameters set), reserving its blocks.
Tensor fill_random(Tensor out, backend::RandomFill r) {
  const uint64_t nblocks = backend::random_blocks(r.kind, out.dtype(), out.numel());
  {
    detail::Generator& g = detail::default_generator();
    std::lock_guard<std::mutex> lock(g.mutex());
    r.seed = g.seed();
    r.first_block = g.reserve(nblocks);
  }
  if (out.numel() > 0) backend::backend(out.device()).random(out, r);
  return out;
}

}  // namespace

void manual_seed(uint64_t seed) {
  detail::Generator& g = detail::default_generator();
  std::lock_guard<std::mutex> lock(g.mutex());
  g.set_seed(seed);
}

Tensor rand(const Shape& size, TensorOptions opts) {
  detail::note_random("rand");
  check_size("rand", size);
  DType dt = float_dtype("rand", opts);
  backend::RandomFill r;
  r.kind = backend::RandomFill::Kind::Uniform;
  Tensor t = fill_random(detail::make_empty(size, dt, opts.device_, "rand"), r);
  if (opts.requires_grad_) t.requires_grad_(true);
  return t;
}

Tensor randn(const Shape& size, TensorOptions opts) {
  detail::note_random("randn");
  check_size("randn", size);
  DType dt = float_dtype("randn", opts);
  backend::RandomFill r;
  r.kind = backend::RandomFill::Kind::Normal;
  Tensor t = fill_random(detail::make_empty(size, dt, opts.device_, "randn"), r);
  if (opts.requires_grad_) t.requires_grad_(true);
  return t;
}

Tensor randint(int64_t low, int64_t high, const Shape& size, TensorOptions opts) {
  detail::note_random("randint");
  check_size("randint", size);
  SMELT_CHECK(low < high,
              "randint: random_ expects 'from' to be less than 'to', but got from={} >= to={}; "
              "pass low < high (values are drawn from [low, high))",
              low, high);
  DType dt = opts.has_dtype ? opts.dtype_ : DType::Int64;
  backend::RandomFill r;
  r.kind = backend::RandomFill::Kind::Integer;
  r.low = low;
  // high - low may overflow int64; the range fits in uint64.
  r.range = static_cast<uint64_t>(high) - static_cast<uint64_t>(low);
  Tensor t = fill_random(detail::make_empty(size, dt, opts.device_, "randint"), r);
  if (opts.requires_grad_) t.requires_grad_(true);
  return t;
}

namespace detail {
Tensor bernoulli_mask(const Shape& shape, double keep_prob, Device device) {
  note_random("bernoulli");
  check_size("bernoulli", shape);
  SMELT_CHECK(keep_prob >= 0.0 && keep_prob <= 1.0,
              "bernoulli: probability must be in [0, 1], got {}", keep_prob);
  backend::RandomFill r;
  r.kind = backend::RandomFill::Kind::Bernoulli;
  r.p = keep_prob;
  return fill_random(make_empty(shape, DType::Bool, device), r);
}
}  // namespace detail

}  // namespace smelt
