// Tensor methods: thin forwards to the free functions of ops.h, and the
// in-place forms, each of which is "compute out of place, then copy_ into self"
// (copy_ is the one write primitive, so compile() functionalizes them all).
#include "core/tensor_impl.h"
#include "smelt/ops.h"

namespace smelt {

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
Tensor& assign(Tensor& self, const char* op, const Tensor& result) {
  check_inplace(op, result.dtype(), self.dtype());
  return self.copy_(result);
}
}  // namespace

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

Tensor Tensor::sum() const { return smelt::sum(*this); }
Tensor Tensor::sum(const std::vector<int64_t>& d, bool k) const { return smelt::sum(*this, d, k); }
Tensor Tensor::mean() const { return smelt::mean(*this); }
Tensor Tensor::mean(const std::vector<int64_t>& d, bool k) const {
  return smelt::mean(*this, d, k);
}
Tensor Tensor::abs() const { return smelt::abs(*this); }
Tensor Tensor::exp() const { return smelt::exp(*this); }
Tensor Tensor::log() const { return smelt::log(*this); }
Tensor Tensor::sqrt() const { return smelt::sqrt(*this); }
Tensor Tensor::neg() const { return smelt::neg(*this); }
Tensor Tensor::sigmoid() const { return smelt::sigmoid(*this); }
Tensor Tensor::relu() const { return smelt::relu(*this); }
Tensor Tensor::tanh() const { return smelt::tanh(*this); }
Tensor Tensor::matmul(const Tensor& o) const { return smelt::matmul(*this, o); }
Tensor Tensor::softmax(int64_t d) const { return smelt::softmax(*this, d); }
Tensor Tensor::argmax(std::optional<int64_t> d, bool k) const { return smelt::argmax(*this, d, k); }
Tensor Tensor::masked_fill(const Tensor& m, const Scalar& v) const {
  return smelt::masked_fill(*this, m, v);
}

Tensor& Tensor::fill_(const Scalar& v) { return copy_(scalar_tensor(v, dtype())); }
Tensor& Tensor::zero_() { return fill_(0); }
Tensor& Tensor::add_(const Tensor& o, const Scalar& a) {
  return assign(*this, "add_", add(*this, o, a));
}
Tensor& Tensor::add_(const Scalar& o) { return assign(*this, "add_", add(*this, o)); }
Tensor& Tensor::sub_(const Tensor& o, const Scalar& a) {
  return assign(*this, "sub_", sub(*this, o, a));
}
Tensor& Tensor::sub_(const Scalar& o) { return assign(*this, "sub_", sub(*this, o)); }
Tensor& Tensor::mul_(const Tensor& o) { return assign(*this, "mul_", mul(*this, o)); }
Tensor& Tensor::mul_(const Scalar& o) { return assign(*this, "mul_", mul(*this, o)); }
Tensor& Tensor::div_(const Tensor& o) { return assign(*this, "div_", div(*this, o)); }
Tensor& Tensor::div_(const Scalar& o) { return assign(*this, "div_", div(*this, o)); }
Tensor& Tensor::clamp_(std::optional<Scalar> lo, std::optional<Scalar> hi) {
  return assign(*this, "clamp_", clamp(*this, lo, hi));
}
Tensor& Tensor::masked_fill_(const Tensor& m, const Scalar& v) {
  return assign(*this, "masked_fill_", smelt::masked_fill(*this, m, v));
}

#define SMELT_UNARY_INPLACE(name) \
  Tensor& Tensor::name##_() { return assign(*this, #name "_", smelt::name(*this)); }
SMELT_UNARY_INPLACE(neg)
SMELT_UNARY_INPLACE(abs)
SMELT_UNARY_INPLACE(exp)
SMELT_UNARY_INPLACE(log)
SMELT_UNARY_INPLACE(sqrt)
SMELT_UNARY_INPLACE(sigmoid)
SMELT_UNARY_INPLACE(relu)
SMELT_UNARY_INPLACE(tanh)
SMELT_UNARY_INPLACE(sin)
SMELT_UNARY_INPLACE(cos)
SMELT_UNARY_INPLACE(floor)
SMELT_UNARY_INPLACE(ceil)
SMELT_UNARY_INPLACE(round)
SMELT_UNARY_INPLACE(trunc)
SMELT_UNARY_INPLACE(reciprocal)
SMELT_UNARY_INPLACE(rsqrt)
#undef SMELT_UNARY_INPLACE

}  // namespace smelt
