// smelt/ops.h — tensor factories and ops, with PyTorch's names and semantics.
//
// Common rules (as in PyTorch):
//  * Binary ops broadcast (trailing dims aligned; size-1 dims stretch) and
//    promote types: dim>0 tensors outrank 0-dim tensors, which outrank C++
//    numbers; within a category promote_types(); a float number promotes an
//    integer tensor to float32.
//  * Negative `dim` counts from the end. A bad dim, shape, dtype or index raises
//    smelt::Error naming the op, the shapes/dtypes and what to do.
//  * float16/bfloat16 compute in float32 and round on store; reductions over
//    them accumulate in float32.
//  * Under smelt::compile tracing the same functions record graph nodes.
#pragma once
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "smelt/tensor.h"

namespace smelt {

// ============================ factories =====================================
Tensor empty(const Shape& size, TensorOptions opts = {});
Tensor zeros(const Shape& size, TensorOptions opts = {});
Tensor ones(const Shape& size, TensorOptions opts = {});
/// dtype defaults to the value's kind (bool / int64 / float32) unless given.
/// Error (as PyTorch) when `value` does not fit the dtype: full({2}, 200, int8),
/// NaN or ±inf for an integer dtype, 70000.0 for float16.
Tensor full(const Shape& size, const Scalar& value, TensorOptions opts = {});
Tensor zeros_like(const Tensor& t);
Tensor ones_like(const Tensor& t);
Tensor empty_like(const Tensor& t);
Tensor full_like(const Tensor& t, const Scalar& value);
/// [start, end) with `step`; int64 when all arguments are integers, else float32.
Tensor arange(const Scalar& end, TensorOptions opts = {});
Tensor arange(const Scalar& start, const Scalar& end, const Scalar& step = 1,
              TensorOptions opts = {});
/// `steps` evenly spaced values from start to end inclusive.
Tensor linspace(double start, double end, int64_t steps, TensorOptions opts = {});
/// n x m identity (m defaults to n).
Tensor eye(int64_t n, std::optional<int64_t> m = std::nullopt, TensorOptions opts = {});
/// Uniform [0, 1), from the global generator (see manual_seed).
Tensor rand(const Shape& size, TensorOptions opts = {});
/// Standard normal, from the global generator.
Tensor randn(const Shape& size, TensorOptions opts = {});
/// Integers uniform in [low, high); int64 by default.
Tensor randint(int64_t low, int64_t high, const Shape& size, TensorOptions opts = {});
/// Seeds the global generator (a 64-bit Philox/mt19937 stream) for reproducible runs.
void manual_seed(uint64_t seed);
/// 0-dim tensor holding `value` (dtype from the value's kind unless given);
/// Error when `value` does not fit the dtype, as full().
Tensor scalar_tensor(const Scalar& value, TensorOptions opts = {});
/// Copies `values` into a new tensor of `shape` (numel must match).
template <class T>
Tensor from_vector(const std::vector<T>& values, const Shape& shape, TensorOptions opts = {});
/// Wraps caller-owned memory without copying (the caller keeps it alive).
/// `strides` default to contiguous.
Tensor from_blob(void* data, const Shape& shape, DType dtype, const Shape& strides = {});

// ============================ unary pointwise ===============================
Tensor neg(const Tensor& x);
Tensor abs(const Tensor& x);
Tensor sign(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor exp2(const Tensor& x);
Tensor expm1(const Tensor& x);
Tensor log(const Tensor& x);
Tensor log2(const Tensor& x);
Tensor log1p(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor rsqrt(const Tensor& x);
Tensor reciprocal(const Tensor& x);
Tensor sin(const Tensor& x);
Tensor cos(const Tensor& x);
Tensor tan(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor relu(const Tensor& x);
/// approximate: "none" (x * Phi(x), erf form) or "tanh"
/// (0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), Hendrycks & Gimpel 2016).
Tensor gelu(const Tensor& x, const std::string& approximate = "none");
Tensor silu(const Tensor& x);
Tensor erf(const Tensor& x);
Tensor floor(const Tensor& x);
Tensor ceil(const Tensor& x);
/// Round half to even, as PyTorch.
Tensor round(const Tensor& x);
Tensor trunc(const Tensor& x);
Tensor logical_not(const Tensor& x);
Tensor bitwise_not(const Tensor& x);
Tensor isnan(const Tensor& x);
Tensor isinf(const Tensor& x);
/// NaN -> nan (0), +inf -> posinf (dtype max), -inf -> neginf (dtype lowest).
Tensor nan_to_num(const Tensor& x, std::optional<double> nan = 0.0,
                  std::optional<double> posinf = std::nullopt,
                  std::optional<double> neginf = std::nullopt);

// ============================ binary pointwise ==============================
Tensor add(const Tensor& a, const Tensor& b, const Scalar& alpha = 1);
Tensor sub(const Tensor& a, const Tensor& b, const Scalar& alpha = 1);
Tensor mul(const Tensor& a, const Tensor& b);
/// rounding_mode: std::nullopt (true division, float result), "trunc" or "floor".
/// float16 / bfloat16 with "trunc" / "floor" round as PyTorch's CPU kernels:
/// by a divisor of more than one element, the quotient is rounded to the
/// dtype before trunc (bfloat16 256 / -1.5 is -171), and each step of floor
/// (c10's div_floor_floating) is rounded; by a one-element divisor (a number,
/// a 0-dim or [1] tensor) they compute in float and round once (-170).
/// Integer division by zero raises smelt::Error.
Tensor div(const Tensor& a, const Tensor& b,
           const std::optional<std::string>& rounding_mode = std::nullopt);
/// div(a, b, "floor").
Tensor floor_divide(const Tensor& a, const Tensor& b);
/// Python modulo: result has the sign of the divisor.
Tensor remainder(const Tensor& a, const Tensor& b);
/// C fmod: result has the sign of the dividend.
Tensor fmod(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& a, const Tensor& b);
/// NaN-propagating elementwise max / min.
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);
/// NaN-ignoring elementwise max / min (C fmax / fmin).
Tensor fmax(const Tensor& a, const Tensor& b);
Tensor fmin(const Tensor& a, const Tensor& b);
Tensor atan2(const Tensor& a, const Tensor& b);
Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
Tensor logical_and(const Tensor& a, const Tensor& b);
Tensor logical_or(const Tensor& a, const Tensor& b);
Tensor logical_xor(const Tensor& a, const Tensor& b);
Tensor bitwise_and(const Tensor& a, const Tensor& b);
Tensor bitwise_or(const Tensor& a, const Tensor& b);
Tensor bitwise_xor(const Tensor& a, const Tensor& b);
/// condition ? a : b (condition must be bool), broadcast over all three.
Tensor where(const Tensor& condition, const Tensor& a, const Tensor& b);
/// min(max(x, min), max) with either bound optional (not both absent), in
/// result_type(x, bounds). As PyTorch 2.15: an integer bound past an integer
/// x's range on the side that changes nothing (int8 x, max 200) is dropped;
/// on the other side (int8 x, max -200) it raises smelt::Error; other number
/// bounds must convert to the result dtype without overflow (float16 x, min
/// 1e5: Error). Bool x: one bool tensor bound clamps (maximum / minimum);
/// both bounds, or bool number bounds, raise (PyTorch has no such kernel).
Tensor clamp(const Tensor& x, std::optional<Scalar> min, std::optional<Scalar> max);
Tensor clamp(const Tensor& x, const std::optional<Tensor>& min, const std::optional<Tensor>& max);
/// start + weight * (end - start), as PyTorch's lerp (one fused multiply-add
/// from the nearer end). start and end must share a dtype; weight too,
/// unless it is 0-dim: then it is read at the result's opmath precision
/// (float32 for float16 / bfloat16) and takes part in type promotion (uint8
/// ends with a float32 0-dim weight give float32). The result must be
/// floating. Errors (smelt::Error) name the dtypes and shapes.
Tensor lerp(const Tensor& start, const Tensor& end, const Tensor& weight);
Tensor lerp(const Tensor& start, const Tensor& end, const Scalar& weight);

// Scalar overloads (the scalar is a "wrapped number", lowest promotion priority).
// As PyTorch on the CPU, the number is first converted to the dtype the op
// computes in (bfloat16 x == 3.14 compares with bfloat16(3.14); float16 x + 1e10
// adds inf), except that mul and div read it as float32 for float16/bfloat16
// tensors; pow's exponent and where's value must fit that dtype (Error for an
// int8 tensor and 200). The op table's NumberRule says which rule an op follows.
Tensor add(const Tensor& a, const Scalar& b, const Scalar& alpha = 1);
Tensor sub(const Tensor& a, const Scalar& b, const Scalar& alpha = 1);
Tensor mul(const Tensor& a, const Scalar& b);
Tensor div(const Tensor& a, const Scalar& b,
           const std::optional<std::string>& rounding_mode = std::nullopt);
Tensor pow(const Tensor& a, const Scalar& b);
Tensor where(const Tensor& condition, const Tensor& a, const Scalar& b);
Tensor where(const Tensor& condition, const Scalar& a, const Tensor& b);

Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator%(const Tensor& a, const Tensor& b);
Tensor operator+(const Tensor& a, const Scalar& b);
Tensor operator-(const Tensor& a, const Scalar& b);
Tensor operator*(const Tensor& a, const Scalar& b);
Tensor operator/(const Tensor& a, const Scalar& b);
Tensor operator+(const Scalar& a, const Tensor& b);
Tensor operator-(const Scalar& a, const Tensor& b);
Tensor operator*(const Scalar& a, const Tensor& b);
Tensor operator/(const Scalar& a, const Tensor& b);
Tensor operator-(const Tensor& a);
Tensor operator==(const Tensor& a, const Tensor& b);
Tensor operator!=(const Tensor& a, const Tensor& b);
Tensor operator<(const Tensor& a, const Tensor& b);
Tensor operator<=(const Tensor& a, const Tensor& b);
Tensor operator>(const Tensor& a, const Tensor& b);
Tensor operator>=(const Tensor& a, const Tensor& b);
Tensor operator&(const Tensor& a, const Tensor& b);
Tensor operator|(const Tensor& a, const Tensor& b);
Tensor operator^(const Tensor& a, const Tensor& b);
Tensor operator~(const Tensor& a);
// A number on either side (a wrapped number, as in `x + 2`): `a > 0`, `1.5 == a`,
// `a % 3`, `mask & true`. Defined with the Tensor methods (src/ops/tensor_methods.cpp).
Tensor operator%(const Tensor& a, const Scalar& b);
Tensor operator%(const Scalar& a, const Tensor& b);
Tensor operator==(const Tensor& a, const Scalar& b);
Tensor operator==(const Scalar& a, const Tensor& b);
Tensor operator!=(const Tensor& a, const Scalar& b);
Tensor operator!=(const Scalar& a, const Tensor& b);
Tensor operator<(const Tensor& a, const Scalar& b);
Tensor operator<(const Scalar& a, const Tensor& b);
Tensor operator<=(const Tensor& a, const Scalar& b);
Tensor operator<=(const Scalar& a, const Tensor& b);
Tensor operator>(const Tensor& a, const Scalar& b);
Tensor operator>(const Scalar& a, const Tensor& b);
Tensor operator>=(const Tensor& a, const Scalar& b);
Tensor operator>=(const Scalar& a, const Tensor& b);
Tensor operator&(const Tensor& a, const Scalar& b);
Tensor operator&(const Scalar& a, const Tensor& b);
Tensor operator|(const Tensor& a, const Scalar& b);
Tensor operator|(const Scalar& a, const Tensor& b);
Tensor operator^(const Tensor& a, const Scalar& b);
Tensor operator^(const Scalar& a, const Tensor& b);

/// The dtype a binary op on a and b computes in (PyTorch's result_type).
DType result_type(const Tensor& a, const Tensor& b);
/// Broadcast shape of a and b; Error naming `op` when incompatible.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op = "broadcast_shapes");

// ============================ reductions ====================================
// `dim` empty means all dims. Reductions over float16/bfloat16 accumulate in float32.
/// dtype: accumulate and return in this dtype; integer/bool inputs sum to int64.
Tensor sum(const Tensor& x, const std::vector<int64_t>& dim = {}, bool keepdim = false,
           std::optional<DType> dtype = std::nullopt);
/// Floating inputs only (Error for integer: pass dtype=float32).
Tensor mean(const Tensor& x, const std::vector<int64_t>& dim = {}, bool keepdim = false,
            std::optional<DType> dtype = std::nullopt);
Tensor prod(const Tensor& x, std::optional<int64_t> dim = std::nullopt, bool keepdim = false,
            std::optional<DType> dtype = std::nullopt);
/// NaN-propagating; Error on an empty reduced dim.
Tensor amax(const Tensor& x, const std::vector<int64_t>& dim = {}, bool keepdim = false);
Tensor amin(const Tensor& x, const std::vector<int64_t>& dim = {}, bool keepdim = false);
/// (values, indices); index of the first occurrence, NaN wins.
std::tuple<Tensor, Tensor> max(const Tensor& x, int64_t dim, bool keepdim = false);
std::tuple<Tensor, Tensor> min(const Tensor& x, int64_t dim, bool keepdim = false);
/// Max / min over all elements (0-dim).
Tensor max(const Tensor& x);
Tensor min(const Tensor& x);
/// Index of the first maximum (NaN wins); over the flattened tensor when dim is nullopt.
Tensor argmax(const Tensor& x, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);
Tensor argmin(const Tensor& x, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);
/// Variance with Bessel-style `correction` (N - correction in the denominator).
Tensor var(const Tensor& x, const std::vector<int64_t>& dim = {}, double correction = 1,
           bool keepdim = false);
Tensor std(const Tensor& x, const std::vector<int64_t>& dim = {}, double correction = 1,
           bool keepdim = false);
/// (var, mean), computed with Welford's algorithm in one pass.
std::tuple<Tensor, Tensor> var_mean(const Tensor& x, const std::vector<int64_t>& dim = {},
                                    double correction = 1, bool keepdim = false);
/// log(sum(exp(x))) computed stably (max subtracted first).
Tensor logsumexp(const Tensor& x, const std::vector<int64_t>& dim, bool keepdim = false);
/// Bool result (uint8 stays uint8, as PyTorch).
Tensor any(const Tensor& x, const std::vector<int64_t>& dim = {}, bool keepdim = false);
Tensor all(const Tensor& x, const std::vector<int64_t>& dim = {}, bool keepdim = false);
/// Inclusive prefix sum along dim; integer/bool inputs accumulate in int64.
Tensor cumsum(const Tensor& x, int64_t dim, std::optional<DType> dtype = std::nullopt);

// ============================ shape and view ops ============================
// These return views (sharing storage) where PyTorch does.
Tensor view(const Tensor& x, const Shape& shape);     // one -1 allowed; Error if strides forbid
Tensor reshape(const Tensor& x, const Shape& shape);  // view when possible, else a copy
Tensor permute(const Tensor& x, const std::vector<int64_t>& dims);
Tensor transpose(const Tensor& x, int64_t dim0, int64_t dim1);
Tensor t(const Tensor& x);  // <= 2-D only
Tensor squeeze(const Tensor& x, std::optional<std::vector<int64_t>> dim = std::nullopt);
Tensor unsqueeze(const Tensor& x, int64_t dim);
Tensor expand(const Tensor& x, const Shape& size);  // -1 keeps a dim
Tensor broadcast_to(const Tensor& x, const Shape& size);
Tensor flatten(const Tensor& x, int64_t start_dim = 0, int64_t end_dim = -1);
Tensor unflatten(const Tensor& x, int64_t dim, const Shape& sizes);
Tensor narrow(const Tensor& x, int64_t dim, int64_t start, int64_t length);
/// x[start:end:step] along dim (Python slice clamping; step > 0).
Tensor slice(const Tensor& x, int64_t dim, std::optional<int64_t> start, std::optional<int64_t> end,
             int64_t step = 1);
Tensor select(const Tensor& x, int64_t dim, int64_t index);
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index);
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index);
/// A copy of `self` with src's elements added at index along `dim`:
/// out[.., index[i..], ..] += src[i..] for every element of index (torch.scatter_add;
/// repeated indices add up). index int64/int32 of self's rank, with index.size(d) <=
/// src.size(d) for every d and <= self.size(d) for d != dim; src of self's dtype;
/// every index in [0, self.size(dim)). Error otherwise.
Tensor scatter_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src);
Tensor cat(const std::vector<Tensor>& tensors, int64_t dim = 0);
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim = 0);
std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim = 0);
std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& split_sizes,
                          int64_t dim = 0);
std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim = 0);
/// Constant padding; `pad` lists (left, right) pairs starting from the last dim.
Tensor pad(const Tensor& x, const std::vector<int64_t>& pad, double value = 0.0);
Tensor tril(const Tensor& x, int64_t diagonal = 0);
Tensor triu(const Tensor& x, int64_t diagonal = 0);
/// x with `value` where mask is true; Error when `value` does not fit x's dtype
/// (as PyTorch: 200 or NaN for int8, 1e10 for float16; any number fits bool).
Tensor masked_fill(const Tensor& x, const Tensor& mask, const Scalar& value);
Tensor contiguous(const Tensor& x);
Tensor clone(const Tensor& x);
/// Converts dtype (float->int truncates toward zero; rounding as a store would).
Tensor to_dtype(const Tensor& x, DType dtype);

// ============================ neural-network functional ======================
/// 1-D·1-D dot, 2-D mm, N-D batched with broadcast batch dims (as torch.matmul).
Tensor matmul(const Tensor& a, const Tensor& b);
/// x @ weight^T + bias; weight [out, in], bias [out].
Tensor linear(const Tensor& x, const Tensor& weight,
              const std::optional<Tensor>& bias = std::nullopt);
Tensor softmax(const Tensor& x, int64_t dim, std::optional<DType> dtype = std::nullopt);
Tensor log_softmax(const Tensor& x, int64_t dim, std::optional<DType> dtype = std::nullopt);
/// Normalizes over the trailing `normalized_shape` dims (biased variance).
Tensor layer_norm(const Tensor& x, const Shape& normalized_shape,
                  const std::optional<Tensor>& weight = std::nullopt,
                  const std::optional<Tensor>& bias = std::nullopt, double eps = 1e-5);
/// x / sqrt(mean(x^2) + eps) * weight; eps defaults to the dtype's machine epsilon.
Tensor rms_norm(const Tensor& x, const Shape& normalized_shape,
                const std::optional<Tensor>& weight = std::nullopt,
                std::optional<double> eps = std::nullopt);
/// Input [N, C, *]. training: normalizes with batch statistics and updates
/// running stats in place (unbiased var, momentum); else uses running stats.
Tensor batch_norm(const Tensor& x, const std::optional<Tensor>& running_mean,
                  const std::optional<Tensor>& running_var,
                  const std::optional<Tensor>& weight = std::nullopt,
                  const std::optional<Tensor>& bias = std::nullopt, bool training = false,
                  double momentum = 0.1, double eps = 1e-5);
/// Zeroes elements with probability p and scales the rest by 1/(1-p) when training.
Tensor dropout(const Tensor& x, double p = 0.5, bool training = true);
/// weight[indices]; indices int32/int64, out of range raises Error.
Tensor embedding(const Tensor& weight, const Tensor& indices);
/// input [N, C] (or [C]) logits, target [N] class indices; reduction "mean" | "sum" | "none".
Tensor cross_entropy(const Tensor& input, const Tensor& target, int64_t ignore_index = -100,
                     const std::string& reduction = "mean", double label_smoothing = 0.0);
/// Negative log-likelihood of class-index targets given log-probabilities (as
/// torch.nn.functional.nll_loss): input [C], [N, C] or [N, C, d1, ...], target
/// int64 of the batch shape, each in [0, C) or ignore_index (ignored: loss 0, and
/// left out of the mean); weight [C] scales each class (the mean divides by the
/// summed weights of the counted targets). reduction "mean" | "sum" | "none".
Tensor nll_loss(const Tensor& input, const Tensor& target,
                const std::optional<Tensor>& weight = std::nullopt, int64_t ignore_index = -100,
                const std::string& reduction = "mean");
/// Binary cross-entropy of logits (torch.nn.functional.binary_cross_entropy_with_logits):
/// (1 - t) x - w_p log sigmoid(x), with w_p = 1 + (pos_weight - 1) t, times weight;
/// computed stably for large |x|. target of input's shape, floating; weight and
/// pos_weight broadcast to it. reduction "mean" | "sum" | "none".
Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target,
                                        const std::optional<Tensor>& weight = std::nullopt,
                                        const std::string& reduction = "mean",
                                        const std::optional<Tensor>& pos_weight = std::nullopt);
Tensor mse_loss(const Tensor& input, const Tensor& target, const std::string& reduction = "mean");
/// softmax(q k^T * scale + mask) v; q [..., L, E], k [..., S, E], v [..., S, Ev];
/// attn_mask bool (true = keep) or float (added); scale defaults to 1/sqrt(E).
/// q, k and v share one floating dtype. Scores and softmax are computed in
/// float32 (float64 inputs: float64); for float16 / bfloat16 the probabilities
/// are rounded to that dtype before the product with v, which accumulates in
/// float32 and rounds once (the numerics of PyTorch's flash / memory-efficient
/// CUDA kernels; PyTorch's math fallback keeps them in float32).
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const std::optional<Tensor>& attn_mask = std::nullopt,
                                    double dropout_p = 0.0, bool is_causal = false,
                                    std::optional<double> scale = std::nullopt);

}  // namespace smelt
