// Tensor methods, as libtorch's Tensor has them: thin forwards to the free
// functions of ops.h (a number argument becomes a wrapped number, as in
// `x + 2`), the in-place forms, each of which is "compute out of place, then
// copy_ into self" (copy_ is the one write primitive, so compile()
// functionalizes them all; in eager mode a pointwise one writes straight into
// self where that gives the same result, see inplace()), and the operators
// with a number on either side.
#include "core/tensor_impl.h"
#include "ops/numbers.h"
#include "ops/pointwise.h"
#include "ops/pointwise_impl.h"
#include "smelt/ops.h"

namespace smelt {

using detail::wrap_scalar;

namespace {
/// PyTorch's canCast: float -> integer and non-bool -> bool are refused in place.
void check_inplace(const char* op, DType result, DType self) {
  bool ok = !(is_floating(result) && !is_floating(self)) &&
            !(result != DType::Bool && self == DType::Bool);
  SMELT_CHECK(ok,
              "{}: result type {} can't be cast to the desired output type {}; use the "
              "out-of-place op or convert the tensor first (x = x.to(...))",
              op, dtype_name(result), dtype_name(self));
}
/// self.copy_(result) after the dtype check; a graph break in the write names
/// the in-place op the user called, not copy_.
Tensor& assign(const Tensor& self, const char* op, const Tensor& result) {
  check_inplace(op, result.dtype(), self.dtype());
  try {
    return self.copy_(result);
  } catch (const GraphBreak& br) {
    if (br.op() != "copy_") throw;
    throw GraphBreak(op, br.reason(), br.advice());
  }
}
/// An in-place pointwise method: `compute` (the out-of-place op on self)
/// writes its result straight into self where its launch can
/// (detail::pw::InplaceTarget: one kernel, no temporary); otherwise its
/// result is assigned as above.
template <class F>
Tensor& inplace(const Tensor& self, const char* op, const F& compute) {
  Tensor result;
  bool written = false;
  {
    detail::pw::InplaceTarget target(self);
    result = compute();
    written = target.used();
  }
  if (written) return const_cast<Tensor&>(self);
  return assign(self, op, result);
}
}  // namespace

// ---- views -------------------------------------------------------------------------
Tensor Tensor::view(const Shape& shape) const { return smelt::view(*this, shape); }
Tensor Tensor::reshape(const Shape& shape) const { return smelt::reshape(*this, shape); }
Tensor Tensor::permute(const std::vector<int64_t>& dims) const {
  return smelt::permute(*this, dims);
}
Tensor Tensor::transpose(int64_t d0, int64_t d1) const { return smelt::transpose(*this, d0, d1); }
Tensor Tensor::t() const { return smelt::t(*this); }
Tensor Tensor::squeeze() const { return smelt::squeeze(*this); }
Tensor Tensor::squeeze(int64_t d) const { return smelt::squeeze(*this, std::vector<int64_t>{d}); }
Tensor Tensor::unsqueeze(int64_t d) const { return smelt::unsqueeze(*this, d); }
Tensor Tensor::expand(const Shape& size) const { return smelt::expand(*this, size); }
Tensor Tensor::flatten(int64_t s, int64_t e) const { return smelt::flatten(*this, s, e); }
Tensor Tensor::unflatten(int64_t d, const Shape& s) const { return smelt::unflatten(*this, d, s); }
Tensor Tensor::narrow(int64_t d, int64_t s, int64_t l) const {
  return smelt::narrow(*this, d, s, l);
}
Tensor Tensor::select(int64_t d, int64_t i) const { return smelt::select(*this, d, i); }
Tensor Tensor::slice(int64_t d, std::optional<int64_t> s, std::optional<int64_t> e,
                     int64_t step) const {
  return smelt::slice(*this, d, s, e, step);
}

// ---- unary pointwise ------------------------------------------------------------------
#define SMELT_UNARY_METHOD(name) \
  Tensor Tensor::name() const { return smelt::name(*this); }
SMELT_UNARY_METHOD(neg)
SMELT_UNARY_METHOD(abs)
SMELT_UNARY_METHOD(sign)
SMELT_UNARY_METHOD(exp)
SMELT_UNARY_METHOD(exp2)
SMELT_UNARY_METHOD(expm1)
SMELT_UNARY_METHOD(log)
SMELT_UNARY_METHOD(log2)
SMELT_UNARY_METHOD(log1p)
SMELT_UNARY_METHOD(sqrt)
SMELT_UNARY_METHOD(rsqrt)
SMELT_UNARY_METHOD(reciprocal)
SMELT_UNARY_METHOD(sin)
SMELT_UNARY_METHOD(cos)
SMELT_UNARY_METHOD(tan)
SMELT_UNARY_METHOD(tanh)
SMELT_UNARY_METHOD(sigmoid)
SMELT_UNARY_METHOD(relu)
SMELT_UNARY_METHOD(erf)
SMELT_UNARY_METHOD(floor)
SMELT_UNARY_METHOD(ceil)
SMELT_UNARY_METHOD(round)
SMELT_UNARY_METHOD(trunc)
SMELT_UNARY_METHOD(logical_not)
SMELT_UNARY_METHOD(bitwise_not)
SMELT_UNARY_METHOD(isnan)
SMELT_UNARY_METHOD(isinf)
#undef SMELT_UNARY_METHOD
Tensor Tensor::nan_to_num(std::optional<double> nan, std::optional<double> posinf,
                          std::optional<double> neginf) const {
  return smelt::nan_to_num(*this, nan, posinf, neginf);
}

// ---- binary pointwise -----------------------------------------------------------------
Tensor Tensor::add(const Tensor& o, const Scalar& a) const { return smelt::add(*this, o, a); }
Tensor Tensor::add(const Scalar& o, const Scalar& a) const { return smelt::add(*this, o, a); }
Tensor Tensor::sub(const Tensor& o, const Scalar& a) const { return smelt::sub(*this, o, a); }
Tensor Tensor::sub(const Scalar& o, const Scalar& a) const { return smelt::sub(*this, o, a); }
Tensor Tensor::mul(const Tensor& o) const { return smelt::mul(*this, o); }
Tensor Tensor::mul(const Scalar& o) const { return smelt::mul(*this, o); }
Tensor Tensor::div(const Tensor& o, const std::optional<std::string>& mode) const {
  return smelt::div(*this, o, mode);
}
Tensor Tensor::div(const Scalar& o, const std::optional<std::string>& mode) const {
  return smelt::div(*this, o, mode);
}
Tensor Tensor::pow(const Tensor& e) const { return smelt::pow(*this, e); }
Tensor Tensor::pow(const Scalar& e) const { return smelt::pow(*this, e); }
// Ops whose number form is the tensor form with a wrapped number.
#define SMELT_BINARY_METHOD(name)                                              \
  Tensor Tensor::name(const Tensor& o) const { return smelt::name(*this, o); } \
  Tensor Tensor::name(const Scalar& o) const { return smelt::name(*this, wrap_scalar(o)); }
SMELT_BINARY_METHOD(floor_divide)
SMELT_BINARY_METHOD(remainder)
SMELT_BINARY_METHOD(fmod)
SMELT_BINARY_METHOD(eq)
SMELT_BINARY_METHOD(ne)
SMELT_BINARY_METHOD(lt)
SMELT_BINARY_METHOD(le)
SMELT_BINARY_METHOD(gt)
SMELT_BINARY_METHOD(ge)
SMELT_BINARY_METHOD(bitwise_and)
SMELT_BINARY_METHOD(bitwise_or)
SMELT_BINARY_METHOD(bitwise_xor)
#undef SMELT_BINARY_METHOD
#define SMELT_TENSOR_BINARY_METHOD(name) \
  Tensor Tensor::name(const Tensor& o) const { return smelt::name(*this, o); }
SMELT_TENSOR_BINARY_METHOD(maximum)
SMELT_TENSOR_BINARY_METHOD(minimum)
SMELT_TENSOR_BINARY_METHOD(fmax)
SMELT_TENSOR_BINARY_METHOD(fmin)
SMELT_TENSOR_BINARY_METHOD(atan2)
SMELT_TENSOR_BINARY_METHOD(logical_and)
SMELT_TENSOR_BINARY_METHOD(logical_or)
SMELT_TENSOR_BINARY_METHOD(logical_xor)
#undef SMELT_TENSOR_BINARY_METHOD
Tensor Tensor::where(const Tensor& c, const Tensor& o) const { return smelt::where(c, *this, o); }
Tensor Tensor::where(const Tensor& c, const Scalar& o) const { return smelt::where(c, *this, o); }
Tensor Tensor::clamp(std::optional<Scalar> lo, std::optional<Scalar> hi) const {
  return smelt::clamp(*this, lo, hi);
}
Tensor Tensor::clamp(const std::optional<Tensor>& lo, const std::optional<Tensor>& hi) const {
  return smelt::clamp(*this, lo, hi);
}
Tensor Tensor::lerp(const Tensor& e, const Tensor& w) const { return smelt::lerp(*this, e, w); }
Tensor Tensor::lerp(const Tensor& e, const Scalar& w) const { return smelt::lerp(*this, e, w); }

// ---- reductions -----------------------------------------------------------------------
Tensor Tensor::sum(std::optional<DType> t) const { return smelt::sum(*this, {}, false, t); }
Tensor Tensor::sum(int64_t d, bool k, std::optional<DType> t) const {
  return smelt::sum(*this, {d}, k, t);
}
Tensor Tensor::sum(const std::vector<int64_t>& d, bool k, std::optional<DType> t) const {
  return smelt::sum(*this, d, k, t);
}
Tensor Tensor::mean(std::optional<DType> t) const { return smelt::mean(*this, {}, false, t); }
Tensor Tensor::mean(int64_t d, bool k, std::optional<DType> t) const {
  return smelt::mean(*this, {d}, k, t);
}
Tensor Tensor::mean(const std::vector<int64_t>& d, bool k, std::optional<DType> t) const {
  return smelt::mean(*this, d, k, t);
}
Tensor Tensor::prod(std::optional<DType> t) const {
  return smelt::prod(*this, std::nullopt, false, t);
}
Tensor Tensor::prod(int64_t d, bool k, std::optional<DType> t) const {
  return smelt::prod(*this, d, k, t);
}
Tensor Tensor::amax(int64_t d, bool k) const { return smelt::amax(*this, {d}, k); }
Tensor Tensor::amax(const std::vector<int64_t>& d, bool k) const {
  return smelt::amax(*this, d, k);
}
Tensor Tensor::amin(int64_t d, bool k) const { return smelt::amin(*this, {d}, k); }
Tensor Tensor::amin(const std::vector<int64_t>& d, bool k) const {
  return smelt::amin(*this, d, k);
}
Tensor Tensor::max() const { return smelt::max(*this); }
std::tuple<Tensor, Tensor> Tensor::max(int64_t d, bool k) const { return smelt::max(*this, d, k); }
Tensor Tensor::max(const Tensor& o) const { return smelt::maximum(*this, o); }
Tensor Tensor::min() const { return smelt::min(*this); }
std::tuple<Tensor, Tensor> Tensor::min(int64_t d, bool k) const { return smelt::min(*this, d, k); }
Tensor Tensor::min(const Tensor& o) const { return smelt::minimum(*this, o); }
Tensor Tensor::argmax(std::optional<int64_t> d, bool k) const { return smelt::argmax(*this, d, k); }
Tensor Tensor::argmin(std::optional<int64_t> d, bool k) const { return smelt::argmin(*this, d, k); }
Tensor Tensor::var(int64_t d, double c, bool k) const { return smelt::var(*this, {d}, c, k); }
Tensor Tensor::var(const std::vector<int64_t>& d, double c, bool k) const {
  return smelt::var(*this, d, c, k);
}
Tensor Tensor::std(int64_t d, double c, bool k) const { return smelt::std(*this, {d}, c, k); }
Tensor Tensor::std(const std::vector<int64_t>& d, double c, bool k) const {
  return smelt::std(*this, d, c, k);
}
Tensor Tensor::logsumexp(int64_t d, bool k) const { return smelt::logsumexp(*this, {d}, k); }
Tensor Tensor::logsumexp(const std::vector<int64_t>& d, bool k) const {
  return smelt::logsumexp(*this, d, k);
}
Tensor Tensor::any() const { return smelt::any(*this); }
Tensor Tensor::any(int64_t d, bool k) const { return smelt::any(*this, {d}, k); }
Tensor Tensor::all() const { return smelt::all(*this); }
Tensor Tensor::all(int64_t d, bool k) const { return smelt::all(*this, {d}, k); }
Tensor Tensor::cumsum(int64_t d, std::optional<DType> t) const {
  return smelt::cumsum(*this, d, t);
}

// ---- data movement --------------------------------------------------------------------
Tensor Tensor::broadcast_to(const Shape& size) const { return smelt::broadcast_to(*this, size); }
Tensor Tensor::expand_as(const Tensor& o) const { return smelt::expand(*this, o.sizes()); }
Tensor Tensor::view_as(const Tensor& o) const { return smelt::view(*this, o.sizes()); }
Tensor Tensor::reshape_as(const Tensor& o) const { return smelt::reshape(*this, o.sizes()); }
Tensor Tensor::type_as(const Tensor& o) const { return to(o.dtype()); }
Tensor Tensor::index_select(int64_t d, const Tensor& i) const {
  return smelt::index_select(*this, d, i);
}
Tensor Tensor::gather(int64_t d, const Tensor& i) const { return smelt::gather(*this, d, i); }
std::vector<Tensor> Tensor::split(int64_t s, int64_t d) const { return smelt::split(*this, s, d); }
std::vector<Tensor> Tensor::split(const std::vector<int64_t>& s, int64_t d) const {
  return smelt::split(*this, s, d);
}
std::vector<Tensor> Tensor::chunk(int64_t c, int64_t d) const { return smelt::chunk(*this, c, d); }
Tensor Tensor::tril(int64_t k) const { return smelt::tril(*this, k); }
Tensor Tensor::triu(int64_t k) const { return smelt::triu(*this, k); }
Tensor Tensor::masked_fill(const Tensor& m, const Scalar& v) const {
  return smelt::masked_fill(*this, m, v);
}

// ---- neural-network ops ---------------------------------------------------------------
Tensor Tensor::matmul(const Tensor& o) const { return smelt::matmul(*this, o); }
Tensor Tensor::softmax(int64_t d, std::optional<DType> t) const {
  return smelt::softmax(*this, d, t);
}
Tensor Tensor::log_softmax(int64_t d, std::optional<DType> t) const {
  return smelt::log_softmax(*this, d, t);
}

// ---- in-place -------------------------------------------------------------------------
Tensor& Tensor::fill_(const Scalar& v) const {
  return assign(*this, "fill_",
                scalar_tensor(detail::checked_number_to_dtype(v, dtype(), "fill_"), dtype()));
}
Tensor& Tensor::zero_() const { return assign(*this, "zero_", scalar_tensor(0, dtype())); }
Tensor& Tensor::add_(const Tensor& o, const Scalar& a) const {
  return inplace(*this, "add_", [&] { return smelt::add(*this, o, a); });
}
Tensor& Tensor::add_(const Scalar& o, const Scalar& a) const {
  return inplace(*this, "add_", [&] { return smelt::add(*this, o, a); });
}
Tensor& Tensor::sub_(const Tensor& o, const Scalar& a) const {
  return inplace(*this, "sub_", [&] { return smelt::sub(*this, o, a); });
}
Tensor& Tensor::sub_(const Scalar& o, const Scalar& a) const {
  return inplace(*this, "sub_", [&] { return smelt::sub(*this, o, a); });
}
Tensor& Tensor::div_(const Tensor& o, const std::optional<std::string>& mode) const {
  return inplace(*this, "div_", [&] { return smelt::div(*this, o, mode); });
}
Tensor& Tensor::div_(const Scalar& o, const std::optional<std::string>& mode) const {
  return inplace(*this, "div_", [&] { return smelt::div(*this, o, mode); });
}
#define SMELT_BINARY_INPLACE(name)                             \
  Tensor& Tensor::name##_(const Tensor& o) const {             \
    return inplace(*this, #name "_", [&] { return name(o); }); \
  }
#define SMELT_BINARY_INPLACE_NUMBER(name)                      \
  SMELT_BINARY_INPLACE(name)                                   \
  Tensor& Tensor::name##_(const Scalar& o) const {             \
    return inplace(*this, #name "_", [&] { return name(o); }); \
  }
SMELT_BINARY_INPLACE_NUMBER(mul)
SMELT_BINARY_INPLACE_NUMBER(floor_divide)
SMELT_BINARY_INPLACE_NUMBER(remainder)
SMELT_BINARY_INPLACE_NUMBER(fmod)
SMELT_BINARY_INPLACE_NUMBER(pow)
SMELT_BINARY_INPLACE(atan2)
SMELT_BINARY_INPLACE(bitwise_and)
SMELT_BINARY_INPLACE(bitwise_or)
SMELT_BINARY_INPLACE(bitwise_xor)
SMELT_BINARY_INPLACE(logical_and)
SMELT_BINARY_INPLACE(logical_or)
SMELT_BINARY_INPLACE(logical_xor)
#undef SMELT_BINARY_INPLACE_NUMBER
#undef SMELT_BINARY_INPLACE
Tensor& Tensor::clamp_(std::optional<Scalar> lo, std::optional<Scalar> hi) const {
  return inplace(*this, "clamp_", [&] { return smelt::clamp(*this, lo, hi); });
}
Tensor& Tensor::lerp_(const Tensor& e, const Scalar& w) const {
  return inplace(*this, "lerp_", [&] { return smelt::lerp(*this, e, w); });
}
Tensor& Tensor::lerp_(const Tensor& e, const Tensor& w) const {
  return inplace(*this, "lerp_", [&] { return smelt::lerp(*this, e, w); });
}
Tensor& Tensor::masked_fill_(const Tensor& m, const Scalar& v) const {
  return assign(*this, "masked_fill_", smelt::masked_fill(*this, m, v));
}
Tensor& Tensor::tril_(int64_t k) const { return assign(*this, "tril_", smelt::tril(*this, k)); }
Tensor& Tensor::triu_(int64_t k) const { return assign(*this, "triu_", smelt::triu(*this, k)); }
Tensor& Tensor::nan_to_num_(std::optional<double> nan, std::optional<double> posinf,
                            std::optional<double> neginf) const {
  return inplace(*this, "nan_to_num_",
                 [&] { return smelt::nan_to_num(*this, nan, posinf, neginf); });
}

#define SMELT_UNARY_INPLACE(name)                                         \
  Tensor& Tensor::name##_() const {                                       \
    return inplace(*this, #name "_", [&] { return smelt::name(*this); }); \
  }
SMELT_UNARY_INPLACE(neg)
SMELT_UNARY_INPLACE(abs)
SMELT_UNARY_INPLACE(sign)
SMELT_UNARY_INPLACE(exp)
SMELT_UNARY_INPLACE(exp2)
SMELT_UNARY_INPLACE(expm1)
SMELT_UNARY_INPLACE(log)
SMELT_UNARY_INPLACE(log2)
SMELT_UNARY_INPLACE(log1p)
SMELT_UNARY_INPLACE(sqrt)
SMELT_UNARY_INPLACE(rsqrt)
SMELT_UNARY_INPLACE(reciprocal)
SMELT_UNARY_INPLACE(sin)
SMELT_UNARY_INPLACE(cos)
SMELT_UNARY_INPLACE(tan)
SMELT_UNARY_INPLACE(tanh)
SMELT_UNARY_INPLACE(sigmoid)
SMELT_UNARY_INPLACE(relu)
SMELT_UNARY_INPLACE(erf)
SMELT_UNARY_INPLACE(floor)
SMELT_UNARY_INPLACE(ceil)
SMELT_UNARY_INPLACE(round)
SMELT_UNARY_INPLACE(trunc)
SMELT_UNARY_INPLACE(logical_not)
SMELT_UNARY_INPLACE(bitwise_not)
#undef SMELT_UNARY_INPLACE

// ---- operators with a number on either side -------------------------------------------
#define SMELT_NUMBER_OPERATOR(sym, name)                                                    \
  Tensor operator sym(const Tensor& a, const Scalar& b) { return name(a, wrap_scalar(b)); } \
  Tensor operator sym(const Scalar& a, const Tensor& b) { return name(wrap_scalar(a), b); }
SMELT_NUMBER_OPERATOR(%, remainder)
SMELT_NUMBER_OPERATOR(==, eq)
SMELT_NUMBER_OPERATOR(!=, ne)
SMELT_NUMBER_OPERATOR(<, lt)
SMELT_NUMBER_OPERATOR(<=, le)
SMELT_NUMBER_OPERATOR(>, gt)
SMELT_NUMBER_OPERATOR(>=, ge)
SMELT_NUMBER_OPERATOR(&, bitwise_and)
SMELT_NUMBER_OPERATOR(|, bitwise_or)
SMELT_NUMBER_OPERATOR(^, bitwise_xor)
#undef SMELT_NUMBER_OPERATOR

}  // namespace smelt
