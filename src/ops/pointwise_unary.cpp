// Unary pointwise ops (ops.h "unary pointwise"), PyTorch semantics; the
// element functions run on the tensors' backend (pw::launch).
#include <limits>
#include <optional>
#include <string>

#include "ops/pointwise_impl.h"
#include "smelt/ops.h"

namespace smelt {

using namespace detail::pw;

namespace {

const Tensor& req(const char* op, const Tensor& x) {
  SMELT_CHECK(x.defined(), "{}: got an undefined tensor", op);
  return x;
}

Tensor unary(const char* op, const Tensor& x, detail::Attrs attrs = {}) {
  req(op, x);
  DType dt = detail::compute_dtype(op, {x});
  return launch({op, op, dt, detail::output_dtype(op, dt), std::move(attrs)}, {x});
}

void refuse_bool(const char* op, const Tensor& x) {
  SMELT_CHECK(req(op, x).dtype() != DType::Bool,
              "{}: not implemented for bool tensors (shape {}); convert first, e.g. x.to(int64)",
              op, detail::shape_str(x.sizes()));
}

void require_floating(const char* op, const Tensor& x) {
  SMELT_CHECK(is_floating(req(op, x).dtype()),
              "{}: not implemented for dtype {} (floating dtypes only); convert first, e.g. "
              "x.to(float32)",
              op, dtype_name(x.dtype()));
}

}  // namespace

Tensor neg(const Tensor& x) {
  SMELT_CHECK(req("neg", x).dtype() != DType::Bool,
              "neg: negation, the `-` operator, on a bool tensor is not supported; to invert a "
              "mask use the `~` operator (bitwise_not) or logical_not() instead");
  return unary("neg", x);
}
Tensor abs(const Tensor& x) {
  refuse_bool("abs", x);
  return unary("abs", x);
}
Tensor sign(const Tensor& x) { return unary("sign", x); }

#define SMELT_FLOAT_UNARY(name) \
  Tensor name(const Tensor& x) { return unary(#name, x); }
SMELT_FLOAT_UNARY(exp)
SMELT_FLOAT_UNARY(exp2)
SMELT_FLOAT_UNARY(expm1)
SMELT_FLOAT_UNARY(log)
SMELT_FLOAT_UNARY(log2)
SMELT_FLOAT_UNARY(log1p)
SMELT_FLOAT_UNARY(sqrt)
SMELT_FLOAT_UNARY(rsqrt)
SMELT_FLOAT_UNARY(reciprocal)
SMELT_FLOAT_UNARY(sin)
SMELT_FLOAT_UNARY(cos)
SMELT_FLOAT_UNARY(tan)
SMELT_FLOAT_UNARY(tanh)
SMELT_FLOAT_UNARY(sigmoid)
SMELT_FLOAT_UNARY(erf)
#undef SMELT_FLOAT_UNARY

Tensor relu(const Tensor& x) {
  SMELT_CHECK(req("relu", x).dtype() != DType::Bool,
              "relu: boolean inputs are not supported; convert first, e.g. x.to(float32)");
  return unary("relu", x);
}

Tensor gelu(const Tensor& x, const std::string& approximate) {
  SMELT_CHECK(approximate == "none" || approximate == "tanh",
              "gelu: approximate must be \"none\" or \"tanh\", got \"{}\"", approximate);
  require_floating("gelu", x);
  detail::Attrs attrs{{"approximate", approximate}};
  return unary("gelu", x, attrs);
}

Tensor silu(const Tensor& x) {
  require_floating("silu", x);
  return unary("silu", x);
}

#define SMELT_ROUNDING_UNARY(name) \
  Tensor name(const Tensor& x) {   \
    refuse_bool(#name, x);         \
    return unary(#name, x);        \
  }
SMELT_ROUNDING_UNARY(floor)
SMELT_ROUNDING_UNARY(ceil)
SMELT_ROUNDING_UNARY(round)
SMELT_ROUNDING_UNARY(trunc)
#undef SMELT_ROUNDING_UNARY

Tensor logical_not(const Tensor& x) { return unary("logical_not", x); }

Tensor bitwise_not(const Tensor& x) {
  SMELT_CHECK(!is_floating(req("bitwise_not", x).dtype()),
              "bitwise_not: not implemented for dtype {} (integer and bool dtypes only)",
              dtype_name(x.dtype()));
  return unary("bitwise_not", x);
}

Tensor isnan(const Tensor& x) { return unary("isnan", x); }
Tensor isinf(const Tensor& x) { return unary("isinf", x); }

Tensor nan_to_num(const Tensor& x, std::optional<double> nan, std::optional<double> posinf,
                  std::optional<double> neginf) {
  DType t = req("nan_to_num", x).dtype();
  double hi = 0.0, lo = 0.0, nv = 0.0;
  if (is_floating(t)) {  // integers and bool pass through unchanged; the values are unused
    switch (t) {
      case DType::Float16:
        hi = 65504.0;
        break;
      case DType::BFloat16:
        hi = static_cast<double>(static_cast<float>(BFloat16::from_bits(0x7f7f)));
        break;
      case DType::Float32:
        hi = std::numeric_limits<float>::max();
        break;
      default:
        hi = std::numeric_limits<double>::max();
        break;
    }
    lo = -hi;
    nv = nan.value_or(0.0);
    hi = posinf.value_or(hi);
    lo = neginf.value_or(lo);
  }
  detail::Attrs attrs{{"nan", nv}, {"posinf", hi}, {"neginf", lo}};
  return unary("nan_to_num", x, attrs);
}

Tensor operator-(const Tensor& a) { return neg(a); }
Tensor operator~(const Tensor& a) { return bitwise_not(a); }

}  // namespace smelt
