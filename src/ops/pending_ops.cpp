// TEMPORARY while the foundation is being written: weak definitions of ops not
// written yet, each raising Error. Real definitions override them at link time.
// This file is deleted once every op exists.
#include "smelt/ops.h"

namespace smelt {
[[noreturn]] static void pending(const char* op) {
  SMELT_CHECK(false, "{}: not implemented yet", op);
}
__attribute__((weak)) Tensor empty(const Shape& size, TensorOptions opts) { pending("empty"); }
__attribute__((weak)) Tensor zeros(const Shape& size, TensorOptions opts) { pending("zeros"); }
__attribute__((weak)) Tensor ones(const Shape& size, TensorOptions opts) { pending("ones"); }
__attribute__((weak)) Tensor full(const Shape& size, const Scalar& value, TensorOptions opts) { pending("full"); }
__attribute__((weak)) Tensor zeros_like(const Tensor& t) { pending("zeros_like"); }
__attribute__((weak)) Tensor ones_like(const Tensor& t) { pending("ones_like"); }
__attribute__((weak)) Tensor empty_like(const Tensor& t) { pending("empty_like"); }
__attribute__((weak)) Tensor full_like(const Tensor& t, const Scalar& value) { pending("full_like"); }
__attribute__((weak)) Tensor arange(const Scalar& end, TensorOptions opts) { pending("arange"); }
__attribute__((weak)) Tensor arange(const Scalar& start, const Scalar& end, const Scalar& step, TensorOptions opts) { pending("arange"); }
__attribute__((weak)) Tensor linspace(double start, double end, int64_t steps, TensorOptions opts) { pending("linspace"); }
__attribute__((weak)) Tensor eye(int64_t n, std::optional<int64_t> m, TensorOptions opts) { pending("eye"); }
__attribute__((weak)) Tensor rand(const Shape& size, TensorOptions opts) { pending("rand"); }
__attribute__((weak)) Tensor randn(const Shape& size, TensorOptions opts) { pending("randn"); }
__attribute__((weak)) Tensor randint(int64_t low, int64_t high, const Shape& size, TensorOptions opts) { pending("randint"); }
__attribute__((weak)) void manual_seed(uint64_t seed) { pending("manual_seed"); }
__attribute__((weak)) Tensor scalar_tensor(const Scalar& value, TensorOptions opts) { pending("scalar_tensor"); }
__attribute__((weak)) Tensor from_blob(void* data, const Shape& shape, DType dtype, const Shape& strides) { pending("from_blob"); }
__attribute__((weak)) Tensor neg(const Tensor& x) { pending("neg"); }
__attribute__((weak)) Tensor abs(const Tensor& x) { pending("abs"); }
__attribute__((weak)) Tensor sign(const Tensor& x) { pending("sign"); }
__attribute__((weak)) Tensor exp(const Tensor& x) { pending("exp"); }
__attribute__((weak)) Tensor exp2(const Tensor& x) { pending("exp2"); }
__attribute__((weak)) Tensor expm1(const Tensor& x) { pending("expm1"); }
__attribute__((weak)) Tensor log(const Tensor& x) { pending("log"); }
__attribute__((weak)) Tensor log2(const Tensor& x) { pending("log2"); }
__attribute__((weak)) Tensor log1p(const Tensor& x) { pending("log1p"); }
__attribute__((weak)) Tensor sqrt(const Tensor& x) { pending("sqrt"); }
__attribute__((weak)) Tensor rsqrt(const Tensor& x) { pending("rsqrt"); }
__attribute__((weak)) Tensor reciprocal(const Tensor& x) { pending("reciprocal"); }
__attribute__((weak)) Tensor sin(const Tensor& x) { pending("sin"); }
__attribute__((weak)) Tensor cos(const Tensor& x) { pending("cos"); }
__attribute__((weak)) Tensor tan(const Tensor& x) { pending("tan"); }
__attribute__((weak)) Tensor tanh(const Tensor& x) { pending("tanh"); }
__attribute__((weak)) Tensor sigmoid(const Tensor& x) { pending("sigmoid"); }
__attribute__((weak)) Tensor relu(const Tensor& x) { pending("relu"); }
__attribute__((weak)) Tensor gelu(const Tensor& x, const std::string& approximate) { pending("gelu"); }
__attribute__((weak)) Tensor silu(const Tensor& x) { pending("silu"); }
__attribute__((weak)) Tensor erf(const Tensor& x) { pending("erf"); }
__attribute__((weak)) Tensor floor(const Tensor& x) { pending("floor"); }
__attribute__((weak)) Tensor ceil(const Tensor& x) { pending("ceil"); }
__attribute__((weak)) Tensor round(const Tensor& x) { pending("round"); }
__attribute__((weak)) Tensor trunc(const Tensor& x) { pending("trunc"); }
__attribute__((weak)) Tensor logical_not(const Tensor& x) { pending("logical_not"); }
__attribute__((weak)) Tensor bitwise_not(const Tensor& x) { pending("bitwise_not"); }
__attribute__((weak)) Tensor isnan(const Tensor& x) { pending("isnan"); }
__attribute__((weak)) Tensor isinf(const Tensor& x) { pending("isinf"); }
__attribute__((weak)) Tensor nan_to_num(const Tensor& x, std::optional<double> nan, std::optional<double> posinf, std::optional<double> neginf) { pending("nan_to_num"); }
__attribute__((weak)) Tensor add(const Tensor& a, const Tensor& b, const Scalar& alpha) { pending("add"); }
__attribute__((weak)) Tensor sub(const Tensor& a, const Tensor& b, const Scalar& alpha) { pending("sub"); }
__attribute__((weak)) Tensor mul(const Tensor& a, const Tensor& b) { pending("mul"); }
__attribute__((weak)) Tensor div(const Tensor& a, const Tensor& b, const std::optional<std::string>& rounding_mode) { pending("div"); }
__attribute__((weak)) Tensor floor_divide(const Tensor& a, const Tensor& b) { pending("floor_divide"); }
__attribute__((weak)) Tensor remainder(const Tensor& a, const Tensor& b) { pending("remainder"); }
__attribute__((weak)) Tensor fmod(const Tensor& a, const Tensor& b) { pending("fmod"); }
__attribute__((weak)) Tensor pow(const Tensor& a, const Tensor& b) { pending("pow"); }
__attribute__((weak)) Tensor maximum(const Tensor& a, const Tensor& b) { pending("maximum"); }
__attribute__((weak)) Tensor minimum(const Tensor& a, const Tensor& b) { pending("minimum"); }
__attribute__((weak)) Tensor fmax(const Tensor& a, const Tensor& b) { pending("fmax"); }
__attribute__((weak)) Tensor fmin(const Tensor& a, const Tensor& b) { pending("fmin"); }
__attribute__((weak)) Tensor atan2(const Tensor& a, const Tensor& b) { pending("atan2"); }
__attribute__((weak)) Tensor eq(const Tensor& a, const Tensor& b) { pending("eq"); }
__attribute__((weak)) Tensor ne(const Tensor& a, const Tensor& b) { pending("ne"); }
__attribute__((weak)) Tensor lt(const Tensor& a, const Tensor& b) { pending("lt"); }
__attribute__((weak)) Tensor le(const Tensor& a, const Tensor& b) { pending("le"); }
__attribute__((weak)) Tensor gt(const Tensor& a, const Tensor& b) { pending("gt"); }
__attribute__((weak)) Tensor ge(const Tensor& a, const Tensor& b) { pending("ge"); }
__attribute__((weak)) Tensor logical_and(const Tensor& a, const Tensor& b) { pending("logical_and"); }
__attribute__((weak)) Tensor logical_or(const Tensor& a, const Tensor& b) { pending("logical_or"); }
__attribute__((weak)) Tensor logical_xor(const Tensor& a, const Tensor& b) { pending("logical_xor"); }
__attribute__((weak)) Tensor bitwise_and(const Tensor& a, const Tensor& b) { pending("bitwise_and"); }
__attribute__((weak)) Tensor bitwise_or(const Tensor& a, const Tensor& b) { pending("bitwise_or"); }
__attribute__((weak)) Tensor bitwise_xor(const Tensor& a, const Tensor& b) { pending("bitwise_xor"); }
__attribute__((weak)) Tensor where(const Tensor& condition, const Tensor& a, const Tensor& b) { pending("where"); }
__attribute__((weak)) Tensor clamp(const Tensor& x, std::optional<Scalar> min, std::optional<Scalar> max) { pending("clamp"); }
__attribute__((weak)) Tensor clamp(const Tensor& x, const std::optional<Tensor>& min, const std::optional<Tensor>& max) { pending("clamp"); }
__attribute__((weak)) Tensor lerp(const Tensor& start, const Tensor& end, const Tensor& weight) { pending("lerp"); }
__attribute__((weak)) Tensor lerp(const Tensor& start, const Tensor& end, const Scalar& weight) { pending("lerp"); }
__attribute__((weak)) Tensor add(const Tensor& a, const Scalar& b, const Scalar& alpha) { pending("add"); }
__attribute__((weak)) Tensor sub(const Tensor& a, const Scalar& b, const Scalar& alpha) { pending("sub"); }
__attribute__((weak)) Tensor mul(const Tensor& a, const Scalar& b) { pending("mul"); }
__attribute__((weak)) Tensor div(const Tensor& a, const Scalar& b, const std::optional<std::string>& rounding_mode) { pending("div"); }
__attribute__((weak)) Tensor pow(const Tensor& a, const Scalar& b) { pending("pow"); }
__attribute__((weak)) Tensor where(const Tensor& condition, const Tensor& a, const Scalar& b) { pending("where"); }
__attribute__((weak)) Tensor where(const Tensor& condition, const Scalar& a, const Tensor& b) { pending("where"); }
__attribute__((weak)) Tensor operator+(const Tensor& a, const Tensor& b) { pending("operator+"); }
__attribute__((weak)) Tensor operator-(const Tensor& a, const Tensor& b) { pending("operator-"); }
__attribute__((weak)) Tensor operator*(const Tensor& a, const Tensor& b) { pending("operator*"); }
__attribute__((weak)) Tensor operator/(const Tensor& a, const Tensor& b) { pending("operator/"); }
__attribute__((weak)) Tensor operator%(const Tensor& a, const Tensor& b) { pending("operator%"); }
__attribute__((weak)) Tensor operator+(const Tensor& a, const Scalar& b) { pending("operator+"); }
__attribute__((weak)) Tensor operator-(const Tensor& a, const Scalar& b) { pending("operator-"); }
__attribute__((weak)) Tensor operator*(const Tensor& a, const Scalar& b) { pending("operator*"); }
__attribute__((weak)) Tensor operator/(const Tensor& a, const Scalar& b) { pending("operator/"); }
__attribute__((weak)) Tensor operator+(const Scalar& a, const Tensor& b) { pending("operator+"); }
__attribute__((weak)) Tensor operator-(const Scalar& a, const Tensor& b) { pending("operator-"); }
__attribute__((weak)) Tensor operator*(const Scalar& a, const Tensor& b) { pending("operator*"); }
__attribute__((weak)) Tensor operator/(const Scalar& a, const Tensor& b) { pending("operator/"); }
__attribute__((weak)) Tensor operator-(const Tensor& a) { pending("operator-"); }
__attribute__((weak)) Tensor operator==(const Tensor& a, const Tensor& b) { pending("operator=="); }
__attribute__((weak)) Tensor operator!=(const Tensor& a, const Tensor& b) { pending("operator!="); }
__attribute__((weak)) Tensor operator<(const Tensor& a, const Tensor& b) { pending("operator<"); }
__attribute__((weak)) Tensor operator<=(const Tensor& a, const Tensor& b) { pending("operator<="); }
__attribute__((weak)) Tensor operator>(const Tensor& a, const Tensor& b) { pending("operator>"); }
__attribute__((weak)) Tensor operator>=(const Tensor& a, const Tensor& b) { pending("operator>="); }
__attribute__((weak)) Tensor operator&(const Tensor& a, const Tensor& b) { pending("operator&"); }
__attribute__((weak)) Tensor operator|(const Tensor& a, const Tensor& b) { pending("operator|"); }
__attribute__((weak)) Tensor operator^(const Tensor& a, const Tensor& b) { pending("operator^"); }
__attribute__((weak)) Tensor operator~(const Tensor& a) { pending("operator~"); }
__attribute__((weak)) DType result_type(const Tensor& a, const Tensor& b) { pending("result_type"); }
__attribute__((weak)) Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) { pending("broadcast_shapes"); }
__attribute__((weak)) Tensor sum(const Tensor& x, const std::vector<int64_t>& dim, bool keepdim, std::optional<DType> dtype) { pending("sum"); }
__attribute__((weak)) Tensor mean(const Tensor& x, const std::vector<int64_t>& dim, bool keepdim, std::optional<DType> dtype) { pending("mean"); }
__attribute__((weak)) Tensor prod(const Tensor& x, std::optional<int64_t> dim, bool keepdim, std::optional<DType> dtype) { pending("prod"); }
__attribute__((weak)) Tensor amax(const Tensor& x, const std::vector<int64_t>& dim, bool keepdim) { pending("amax"); }
__attribute__((weak)) Tensor amin(const Tensor& x, const std::vector<int64_t>& dim, bool keepdim) { pending("amin"); }
__attribute__((weak)) std::tuple<Tensor, Tensor> max(const Tensor& x, int64_t dim, bool keepdim) { pending("max"); }
__attribute__((weak)) std::tuple<Tensor, Tensor> min(const Tensor& x, int64_t dim, bool keepdim) { pending("min"); }
__attribute__((weak)) Tensor max(const Tensor& x) { pending("max"); }
__attribute__((weak)) Tensor min(const Tensor& x) { pending("min"); }
__attribute__((weak)) Tensor argmax(const Tensor& x, std::optional<int64_t> dim, bool keepdim) { pending("argmax"); }
__attribute__((weak)) Tensor argmin(const Tensor& x, std::optional<int64_t> dim, bool keepdim) { pending("argmin"); }
__attribute__((weak)) Tensor var(const Tensor& x, const std::vector<int64_t>& dim, double correction, bool keepdim) { pending("var"); }
__attribute__((weak)) Tensor std(const Tensor& x, const std::vector<int64_t>& dim, double correction, bool keepdim) { pending("std"); }
__attribute__((weak)) std::tuple<Tensor, Tensor> var_mean(const Tensor& x, const std::vector<int64_t>& dim, double correction, bool keepdim) { pending("var_mean"); }
__attribute__((weak)) Tensor logsumexp(const Tensor& x, const std::vector<int64_t>& dim, bool keepdim) { pending("logsumexp"); }
__attribute__((weak)) Tensor any(const Tensor& x, const std::vector<int64_t>& dim, bool keepdim) { pending("any"); }
__attribute__((weak)) Tensor all(const Tensor& x, const std::vector<int64_t>& dim, bool keepdim) { pending("all"); }
__attribute__((weak)) Tensor cumsum(const Tensor& x, int64_t dim, std::optional<DType> dtype) { pending("cumsum"); }
__attribute__((weak)) Tensor view(const Tensor& x, const Shape& shape) { pending("view"); }
__attribute__((weak)) Tensor reshape(const Tensor& x, const Shape& shape) { pending("reshape"); }
__attribute__((weak)) Tensor permute(const Tensor& x, const std::vector<int64_t>& dims) { pending("permute"); }
__attribute__((weak)) Tensor transpose(const Tensor& x, int64_t dim0, int64_t dim1) { pending("transpose"); }
__attribute__((weak)) Tensor t(const Tensor& x) { pending("t"); }
__attribute__((weak)) Tensor squeeze(const Tensor& x, std::optional<std::vector<int64_t>> dim) { pending("squeeze"); }
__attribute__((weak)) Tensor unsqueeze(const Tensor& x, int64_t dim) { pending("unsqueeze"); }
__attribute__((weak)) Tensor expand(const Tensor& x, const Shape& size) { pending("expand"); }
__attribute__((weak)) Tensor broadcast_to(const Tensor& x, const Shape& size) { pending("broadcast_to"); }
__attribute__((weak)) Tensor flatten(const Tensor& x, int64_t start_dim, int64_t end_dim) { pending("flatten"); }
__attribute__((weak)) Tensor unflatten(const Tensor& x, int64_t dim, const Shape& sizes) { pending("unflatten"); }
__attribute__((weak)) Tensor narrow(const Tensor& x, int64_t dim, int64_t start, int64_t length) { pending("narrow"); }
__attribute__((weak)) Tensor slice(const Tensor& x, int64_t dim, std::optional<int64_t> start, std::optional<int64_t> end, int64_t step) { pending("slice"); }
__attribute__((weak)) Tensor select(const Tensor& x, int64_t dim, int64_t index) { pending("select"); }
__attribute__((weak)) Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index) { pending("index_select"); }
__attribute__((weak)) Tensor gather(const Tensor& x, int64_t dim, const Tensor& index) { pending("gather"); }
__attribute__((weak)) Tensor cat(const std::vector<Tensor>& tensors, int64_t dim) { pending("cat"); }
__attribute__((weak)) Tensor stack(const std::vector<Tensor>& tensors, int64_t dim) { pending("stack"); }
__attribute__((weak)) std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim) { pending("split"); }
__attribute__((weak)) std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& split_sizes, int64_t dim) { pending("split"); }
__attribute__((weak)) std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim) { pending("chunk"); }
__attribute__((weak)) Tensor pad(const Tensor& x, const std::vector<int64_t>& pad, double value) { pending("pad"); }
__attribute__((weak)) Tensor tril(const Tensor& x, int64_t diagonal) { pending("tril"); }
__attribute__((weak)) Tensor triu(const Tensor& x, int64_t diagonal) { pending("triu"); }
__attribute__((weak)) Tensor masked_fill(const Tensor& x, const Tensor& mask, const Scalar& value) { pending("masked_fill"); }
__attribute__((weak)) Tensor matmul(const Tensor& a, const Tensor& b) { pending("matmul"); }
__attribute__((weak)) Tensor linear(const Tensor& x, const Tensor& weight, const std::optional<Tensor>& bias) { pending("linear"); }
__attribute__((weak)) Tensor softmax(const Tensor& x, int64_t dim, std::optional<DType> dtype) { pending("softmax"); }
__attribute__((weak)) Tensor log_softmax(const Tensor& x, int64_t dim, std::optional<DType> dtype) { pending("log_softmax"); }
__attribute__((weak)) Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const std::optional<Tensor>& weight, const std::optional<Tensor>& bias, double eps) { pending("layer_norm"); }
__attribute__((weak)) Tensor rms_norm(const Tensor& x, const Shape& normalized_shape, const std::optional<Tensor>& weight, std::optional<double> eps) { pending("rms_norm"); }
__attribute__((weak)) Tensor batch_norm(const Tensor& x, const std::optional<Tensor>& running_mean, const std::optional<Tensor>& running_var, const std::optional<Tensor>& weight, const std::optional<Tensor>& bias, bool training, double momentum, double eps) { pending("batch_norm"); }
__attribute__((weak)) Tensor dropout(const Tensor& x, double p, bool training) { pending("dropout"); }
__attribute__((weak)) Tensor embedding(const Tensor& weight, const Tensor& indices) { pending("embedding"); }
__attribute__((weak)) Tensor cross_entropy(const Tensor& input, const Tensor& target, int64_t ignore_index, const std::string& reduction, double label_smoothing) { pending("cross_entropy"); }
__attribute__((weak)) Tensor mse_loss(const Tensor& input, const Tensor& target, const std::string& reduction) { pending("mse_loss"); }
__attribute__((weak)) Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, const std::optional<Tensor>& attn_mask, double dropout_p, bool is_causal, std::optional<double> scale) { pending("scaled_dot_product_attention"); }
__attribute__((weak)) std::string Tensor::str() const { pending("str"); }
__attribute__((weak)) Tensor& Tensor::index_put_(const Tensor&, const Tensor&) { pending("index_put_"); }
}  // namespace smelt

#include "ops/decompose.h"
namespace smelt::detail {
__attribute__((weak)) const Decomposition* find_decomposition(const std::string&) { return nullptr; }
}  // namespace smelt::detail
