// Binary and ternary pointwise ops (ops.h "binary pointwise"), scalar overloads
// and operators; PyTorch semantics, element functions run by the tensors'
// backend (pw::launch).
#include <cmath>
#include <optional>
#include <string>

#include "ops/decompose.h"
#include "ops/numbers.h"
#include "ops/pointwise_impl.h"
#include "smelt/ops.h"

namespace smelt {

using detail::wrap_scalar;
using namespace detail::pw;

namespace {

void req(const char* op, std::initializer_list<const Tensor*> ts) {
  for (auto* t : ts) SMELT_CHECK(t->defined(), "{}: got an undefined tensor", op);
}

std::string dtypes_str(const Tensor& a, const Tensor& b) {
  return fmt::format("{} and {}", dtype_name(a.dtype()), dtype_name(b.dtype()));
}

/// Binary op recorded as `record` (defaults to `op`).
Tensor binary(const char* op, const Tensor& a, const Tensor& b, detail::Attrs attrs = {},
              const char* record = nullptr, bool zero_check = false,
              std::optional<DType> dtype = std::nullopt) {
  req(op, {&a, &b});
  const char* rec = record ? record : op;
  DType dt = dtype ? *dtype : detail::compute_dtype(rec, {a, b});
  return launch({op, rec, dt, detail::output_dtype(rec, dt), std::move(attrs), zero_check}, {a, b});
}

void refuse_bool_compute(const char* op, const Tensor& a, const Tensor& b, DType dt) {
  SMELT_CHECK(dt != DType::Bool,
              "{}: not implemented for bool (dtypes {}); convert the inputs first, e.g. "
              "a.to(int64)",
              op, dtypes_str(a, b));
}

void refuse_float_compute(const char* op, const Tensor& a, const Tensor& b, DType dt) {
  SMELT_CHECK(!is_floating(dt),
              "{}: not implemented for floating dtype {} (inputs {}); bitwise ops take integer or "
              "bool tensors",
              op, dtype_name(dt), dtypes_str(a, b));
}

Tensor add_sub(const char* op, const Tensor& a, const Tensor& b, const Scalar& alpha) {
  req(op, {&a, &b});
  const bool is_sub = op[0] == 's';
  if (is_sub) {
    SMELT_CHECK(a.dtype() != DType::Bool || b.dtype() != DType::Bool,
                "sub: subtraction, the `-` operator, with two bool tensors is not supported; use "
                "the `^` operator (bitwise_xor) or logical_xor() instead");
    SMELT_CHECK(a.dtype() != DType::Bool && b.dtype() != DType::Bool,
                "sub: subtraction, the `-` operator, with a bool tensor is not supported (dtypes "
                "{}); to invert a mask use the `~` operator or logical_not() instead",
                dtypes_str(a, b));
  }
  DType dt = detail::compute_dtype(op, {a, b});
  SMELT_CHECK(is_floating(dt) || !alpha.is_floating(),
              "{}: for integral input tensors (dtypes {}), argument alpha must not be a floating "
              "point number (got {}); pass an integer alpha",
              op, dtypes_str(a, b), alpha.str());
  SMELT_CHECK(dt == DType::Bool || !alpha.is_bool(),
              "{}: boolean alpha is only supported for bool results (dtypes {}); pass a number", op,
              dtypes_str(a, b));
  // PyTorch converts alpha to the result dtype with c10's overflow check
  // (int8 with alpha 257 raises instead of wrapping the product).
  SMELT_CHECK(!detail::number_overflows(alpha, dt),
              "{}: alpha {} cannot be converted to type {} without overflow (as in PyTorch; "
              "dtypes {}); pass an alpha within the range of {}, or convert the tensors to a "
              "wider dtype first",
              op, alpha.str(), dtype_name(dt), dtypes_str(a, b), dtype_name(dt));
  return binary(op, a, b, {{"alpha", alpha}}, nullptr, false, dt);
}

Tensor div_impl(const char* op, const Tensor& a, const Tensor& b,
                const std::optional<std::string>& mode) {
  req(op, {&a, &b});
  if (!mode) return binary(op, a, b, {}, "div");
  SMELT_CHECK(*mode == "trunc" || *mode == "floor",
              "{}: rounding_mode must be none, \"trunc\" or \"floor\", got \"{}\"", op, *mode);
  DType dt = detail::result_type({a, b});
  refuse_bool_compute(op, a, b, dt);
  detail::Attrs attrs{{"rounding_mode", *mode}};
  // floor_divide has no derivative in PyTorch (div with rounding_mode's is 0):
  // its backward raises (div_backward).
  if (std::string_view(op) == "floor_divide") attrs.set("floor_divide", true);
  return binary(op, a, b, attrs, "div", true, dt);
}

}  // namespace

// ---------------------------------------------------------------- arithmetic --
Tensor detail::add_gemm_bias(const Tensor& product, const Tensor& bias) {
  req("add", {&product, &bias});
  return binary("add", product, bias, {{"alpha", Scalar(1)}, {"gemm_bias", true}});
}
Tensor add(const Tensor& a, const Tensor& b, const Scalar& alpha) {
  return add_sub("add", a, b, alpha);
}
Tensor sub(const Tensor& a, const Tensor& b, const Scalar& alpha) {
  return add_sub("sub", a, b, alpha);
}
Tensor mul(const Tensor& a, const Tensor& b) { return binary("mul", a, b); }
Tensor div(const Tensor& a, const Tensor& b, const std::optional<std::string>& rounding_mode) {
  return div_impl("div", a, b, rounding_mode);
}
Tensor floor_divide(const Tensor& a, const Tensor& b) {
  return div_impl("floor_divide", a, b, std::string("floor"));
}

#define SMELT_INT_DIV_OP(name)                                              \
  Tensor name(const Tensor& a, const Tensor& b) {                           \
    req(#name, {&a, &b});                                                   \
    refuse_bool_compute(#name, a, b, detail::compute_dtype(#name, {a, b})); \
    return binary(#name, a, b, {}, nullptr, true);                          \
  }
SMELT_INT_DIV_OP(remainder)
SMELT_INT_DIV_OP(fmod)
#undef SMELT_INT_DIV_OP

Tensor pow(const Tensor& a, const Tensor& b) {
  req("pow", {&a, &b});
  DType dt = detail::compute_dtype("pow", {a, b});
  if (b.is_wrapped_number() && !b.is_tracer()) {  // a Python-number exponent, as PyTorch checks it
    Scalar e = b.item();
    SMELT_CHECK(!(is_integral(dt) && e.is_integral() && e.to_int() < 0),
                "pow: integers to negative integer powers are not allowed (base dtype {}, "
                "exponent {}); use a floating base, e.g. x.to(float32)",
                dtype_name(a.dtype()), e.str());
    // x ** True copies and x ** False is all ones, in every dtype (PyTorch's pow with an
    // exponent equal to 1 or 0): the only bool powers there are.
    if (dt == DType::Bool) return e.to_int() != 0 ? clone(a) : ones_like(a);
  }
  refuse_bool_compute("pow", a, b, dt);
  return binary("pow", a, b, {}, nullptr, false, dt);
}

#define SMELT_SIMPLE_BINARY(name) \
  Tensor name(const Tensor& a, const Tensor& b) { return binary(#name, a, b); }
SMELT_SIMPLE_BINARY(maximum)
SMELT_SIMPLE_BINARY(minimum)
SMELT_SIMPLE_BINARY(fmax)
SMELT_SIMPLE_BINARY(fmin)
SMELT_SIMPLE_BINARY(atan2)
SMELT_SIMPLE_BINARY(eq)
SMELT_SIMPLE_BINARY(ne)
SMELT_SIMPLE_BINARY(lt)
SMELT_SIMPLE_BINARY(le)
SMELT_SIMPLE_BINARY(gt)
SMELT_SIMPLE_BINARY(ge)
SMELT_SIMPLE_BINARY(logical_and)
SMELT_SIMPLE_BINARY(logical_or)
SMELT_SIMPLE_BINARY(logical_xor)
#undef SMELT_SIMPLE_BINARY

#define SMELT_BITWISE_BINARY(name)                                           \
  Tensor name(const Tensor& a, const Tensor& b) {                            \
    req(#name, {&a, &b});                                                    \
    refuse_float_compute(#name, a, b, detail::compute_dtype(#name, {a, b})); \
    return binary(#name, a, b);                                              \
  }
SMELT_BITWISE_BINARY(bitwise_and)
SMELT_BITWISE_BINARY(bitwise_or)
SMELT_BITWISE_BINARY(bitwise_xor)
#undef SMELT_BITWISE_BINARY

// ------------------------------------------------------------------ ternary --
Tensor where(const Tensor& condition, const Tensor& a, const Tensor& b) {
  req("where", {&condition, &a, &b});
  SMELT_CHECK(condition.dtype() == DType::Bool,
              "where: expected condition to be a bool tensor, got dtype {} (shape {}); pass a "
              "comparison result or use cond.to(bool)",
              dtype_name(condition.dtype()), detail::shape_str(condition.sizes()));
  DType dt = detail::compute_dtype("where", {condition, a, b});
  return launch({"where", "where", dt, dt, {}}, {condition, a, b});
}
Tensor where(const Tensor& condition, const Tensor& a, const Scalar& b) {
  return where(condition, a, wrap_scalar(b));
}
Tensor where(const Tensor& condition, const Scalar& a, const Tensor& b) {
  return where(condition, wrap_scalar(a), b);
}

Tensor clamp(const Tensor& x, const std::optional<Tensor>& min, const std::optional<Tensor>& max) {
  const bool has_min = min && min->defined(), has_max = max && max->defined();
  SMELT_CHECK(has_min || has_max,
              "clamp: at least one of 'min' or 'max' must be given (both are None)");
  SMELT_CHECK(x.defined(), "clamp: got an undefined tensor");
  std::vector<Tensor> in{x};
  if (has_min) in.push_back(*min);
  if (has_max) in.push_back(*max);
  DType dt = detail::result_type(in);
  if (dt == DType::Bool) {
    // PyTorch clamps a bool tensor by one bool tensor bound (clamp_min is
    // maximum, clamp_max minimum); with both bounds, or number bounds, it
    // has no bool kernel, and neither do we.
    const bool number =
        (has_min && min->is_wrapped_number()) || (has_max && max->is_wrapped_number());
    SMELT_CHECK(!number && !(has_min && has_max),
                "clamp: not implemented for a bool tensor (shape {}) with {}, as in PyTorch; pass "
                "one bound as a bool tensor, or convert first, e.g. x.to(int64)",
                detail::shape_str(x.sizes()), number ? "bool number bounds" : "both bounds");
    return has_min ? maximum(x, *min) : minimum(x, *max);
  }
  const char* record = has_min && has_max ? "clamp" : has_min ? "clamp_min" : "clamp_max";
  return launch({"clamp", record, dt, dt, {}}, in);
}
namespace {

/// clamp's integer bound `b` (`min` when is_min) for a tensor of integer dtype
/// t, as PyTorch 2.15: a bound outside t's range on the side that changes no
/// element (a min below t's lowest value, a max above its highest) is
/// dropped; one on the other side is refused, since every element would have
/// to become a value t cannot hold. (Not the checked conversion of other
/// numbers: uint8's min -1 does not wrap to 255 here.)
std::optional<Scalar> integer_clamp_bound(const Tensor& x, std::optional<Scalar> b, bool is_min) {
  const DType t = x.dtype();
  if (!b || !is_integral(t) || t == DType::Bool || t == DType::Int64 || b->is_floating() ||
      b->is_bool())
    return b;
  const auto [lo, hi] = detail::dtype_range(t);
  const double v = static_cast<double>(b->to_int());
  if (v >= lo && v <= hi) return b;
  SMELT_CHECK(is_min ? v < lo : v > hi,
              "clamp: {} value {} is outside the representable range of {} [{}, {}] (tensor of "
              "shape {}): every element would become it; pass a bound within the range, or "
              "convert the tensor to a wider dtype first",
              is_min ? "min" : "max", b->to_int(), dtype_name(t), lo, hi,
              detail::shape_str(x.sizes()));
  return std::nullopt;
}

}  // namespace

Tensor clamp(const Tensor& x, std::optional<Scalar> min, std::optional<Scalar> max) {
  SMELT_CHECK(x.defined(), "clamp: got an undefined tensor");
  const bool given = min || max;
  min = integer_clamp_bound(x, min, true);
  max = integer_clamp_bound(x, max, false);
  if (given && !min && !max) return x.clone();  // bounds past the range on their harmless side
  std::optional<Tensor> lo, hi;
  if (min) lo = wrap_scalar(*min);
  if (max) hi = wrap_scalar(*max);
  return clamp(x, lo, hi);
}

Tensor lerp(const Tensor& start, const Tensor& end, const Tensor& weight) {
  req("lerp", {&start, &end, &weight});
  const DType st = start.dtype();
  SMELT_CHECK(end.dtype() == st,
              "lerp: expected dtype {} for `end` but got dtype {} (shapes {} and {}); convert "
              "end first, e.g. end.to({})",
              dtype_name(st), dtype_name(end.dtype()), detail::shape_str(start.sizes()),
              detail::shape_str(end.sizes()), dtype_name(st));
  SMELT_CHECK(weight.is_wrapped_number() || weight.dtype() == st || weight.dim() == 0,
              "lerp: expected dtype {} for `weight` but got dtype {} (shape {}); only a 0-dim "
              "weight may have another dtype; convert it first, e.g. weight.to({})",
              dtype_name(st), dtype_name(weight.dtype()), detail::shape_str(weight.sizes()),
              dtype_name(st));
  // The result dtype promotes the three, as PyTorch's (a 0-dim weight decides
  // it only against 0-dim or integer ends: uint8 ends with a float32 0-dim
  // weight give float32); a number weight leaves it start's.
  const DType dt = weight.is_wrapped_number() ? st : detail::result_type({start, end, weight});
  SMELT_CHECK(is_floating(dt),
              "lerp: not implemented for dtype {} (start of shape {}; floating dtypes only); "
              "convert first, e.g. start.to(float32)",
              dtype_name(dt), detail::shape_str(start.sizes()));
  // A 0-dim weight of another dtype is read at the result's opmath precision,
  // as PyTorch reads it (weight.item<opmath_t>()). For a float32 / float64
  // result the kernel converts it so, and it stays the recorded input:
  // start's gradient takes 1 - weight in the weight's dtype, as PyTorch's
  // formula does. A float16 / bfloat16 result would round it to its own
  // dtype, so it is converted to float32 first.
  const bool convert = !weight.is_wrapped_number() && weight.dtype() != dt && opmath_type(dt) != dt;
  const Tensor w = convert ? weight.to(opmath_type(dt)) : weight;
  return launch({"lerp", "lerp", dt, dt, {}}, {start, end, w});
}
Tensor lerp(const Tensor& start, const Tensor& end, const Scalar& weight) {
  return lerp(start, end, wrap_scalar(weight));
}

// ---------------------------------------------------------- scalar overloads --
Tensor add(const Tensor& a, const Scalar& b, const Scalar& alpha) {
  return add(a, wrap_scalar(b), alpha);
}
Tensor sub(const Tensor& a, const Scalar& b, const Scalar& alpha) {
  return sub(a, wrap_scalar(b), alpha);
}
Tensor mul(const Tensor& a, const Scalar& b) { return mul(a, wrap_scalar(b)); }
Tensor div(const Tensor& a, const Scalar& b, const std::optional<std::string>& rounding_mode) {
  return div(a, wrap_scalar(b), rounding_mode);
}
Tensor pow(const Tensor& a, const Scalar& b) { return pow(a, wrap_scalar(b)); }

// ----------------------------------------------------------------- operators --
Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
Tensor operator%(const Tensor& a, const Tensor& b) { return remainder(a, b); }
Tensor operator+(const Tensor& a, const Scalar& b) { return add(a, b); }
Tensor operator-(const Tensor& a, const Scalar& b) { return sub(a, b); }
Tensor operator*(const Tensor& a, const Scalar& b) { return mul(a, b); }
Tensor operator/(const Tensor& a, const Scalar& b) { return div(a, b); }
Tensor operator+(const Scalar& a, const Tensor& b) { return add(wrap_scalar(a), b); }
Tensor operator-(const Scalar& a, const Tensor& b) { return sub(wrap_scalar(a), b); }
Tensor operator*(const Scalar& a, const Tensor& b) { return mul(wrap_scalar(a), b); }
Tensor operator/(const Scalar& a, const Tensor& b) { return div(wrap_scalar(a), b); }
Tensor operator==(const Tensor& a, const Tensor& b) { return eq(a, b); }
Tensor operator!=(const Tensor& a, const Tensor& b) { return ne(a, b); }
Tensor operator<(const Tensor& a, const Tensor& b) { return lt(a, b); }
Tensor operator<=(const Tensor& a, const Tensor& b) { return le(a, b); }
Tensor operator>(const Tensor& a, const Tensor& b) { return gt(a, b); }
Tensor operator>=(const Tensor& a, const Tensor& b) { return ge(a, b); }
Tensor operator&(const Tensor& a, const Tensor& b) { return bitwise_and(a, b); }
Tensor operator|(const Tensor& a, const Tensor& b) { return bitwise_or(a, b); }
Tensor operator^(const Tensor& a, const Tensor& b) { return bitwise_xor(a, b); }

}  // namespace smelt
