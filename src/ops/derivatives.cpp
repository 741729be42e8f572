// The backward formulas referenced by name from the op table (derivatives.h).
// Sources: PyTorch's tools/autograd/derivatives.yaml and
// torch/csrc/autograd/FunctionsManual.cpp; each formula says where it differs.
// Everything here is written with the public ops, so a formula runs eagerly,
// records again under create_graph and can be traced by the compiler.
#include "ops/derivatives.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "smelt/ops.h"

namespace smelt::detail {

namespace {

int64_t attr_i64(const Attrs& a, const char* k) { return a.as<int64_t>(k); }
const std::vector<int64_t>& attr_dims(const Attrs& a) { return a.as<std::vector<int64_t>>("dim"); }
bool attr_keepdim(const Attrs& a) { return a.has("keepdim") && a.as<bool>("keepdim"); }

/// The reduced dims of a reduction node (its "dim" attr lists them; an empty list
/// on a tensor of rank > 0 never occurs: reductions record every dim explicitly).
int64_t reduced_count(const Shape& sizes, const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= sizes[d];
  return n;
}

/// The extra trailing-dims list of layer_norm / rms_norm.
std::vector<int64_t> trailing_dims(int64_t ndim, size_t count) {
  std::vector<int64_t> dims;
  for (int64_t d = ndim - static_cast<int64_t>(count); d < ndim; ++d) dims.push_back(d);
  return dims;
}

/// The product over several dims (kept), one dim at a time.
Tensor prod_over(const Tensor& x, const std::vector<int64_t>& dims) {
  Tensor r = x;
  for (int64_t d : dims) r = prod(r, d, /*keepdim=*/true);
  return r;
}

/// where(cond, g, 0).
Tensor keep_where(const Tensor& cond, const Tensor& g) { return where(cond, g, Scalar(0.0)); }

/// float16 / bfloat16 -> float32 (as the composites compute); other dtypes unchanged.
Tensor upcast(const Tensor& x) {
  const DType c = opmath_type(x.dtype());
  return c == x.dtype() ? x : to_dtype(x, c);
}

/// var's derivative (FunctionsManual var_backward): 2 (x - mean) g / (N - correction).
Tensor var_grad(const Tensor& g, const Tensor& x, const std::vector<int64_t>& dims,
                double correction, bool keepdim) {
  const double n = static_cast<double>(reduced_count(x.sizes(), dims));
  Tensor gx = unreduce(g, x.sizes(), dims, keepdim);
  return mul(gx, sub(x, mean(x, dims, true))) * (2.0 / (n - correction));
}

}  // namespace

// ---- helpers ---------------------------------------------------------------------------

Tensor sum_to(const Tensor& g, const Shape& shape) {
  if (g.sizes() == shape) return g;
  const int64_t lead = g.dim() - static_cast<int64_t>(shape.size());
  SMELT_INTERNAL_ASSERT(lead >= 0, "sum_to: gradient of shape {} cannot be summed to {}",
                        shape_str(g.sizes()), shape_str(shape));
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < lead; ++d) dims.push_back(d);
  for (size_t i = 0; i < shape.size(); ++i)
    if (shape[i] == 1 && g.size(lead + static_cast<int64_t>(i)) != 1) dims.push_back(lead + i);
  Tensor r = dims.empty() ? g : sum(g, dims, /*keepdim=*/true);
  return reshape(r, shape);
}

Tensor unreduce(const Tensor& g, const Shape& sizes, const std::vector<int64_t>& dims,
                bool keepdim) {
  Tensor r = g;
  if (!keepdim && !sizes.empty()) {
    std::vector<int64_t> sorted = dims;
    std::sort(sorted.begin(), sorted.end());
    for (int64_t d : sorted) r = unsqueeze(r, d);
  }
  return expand(r, sizes);
}

Tensor slice_backward(const Tensor& g, const Shape& sizes, int64_t dim, int64_t start,
                      int64_t step) {
  const int64_t len = g.size(dim), size = sizes[dim];
  // pad's list runs from the last dim: (left, right) of dim d sits at 2 * (nd - 1 - d).
  auto pad_dim = [&](const Tensor& t, int64_t d, int64_t left, int64_t right) {
    std::vector<int64_t> p(static_cast<size_t>(2 * (t.dim() - d)), 0);
    p[2 * (t.dim() - 1 - d)] = left;
    p[2 * (t.dim() - 1 - d) + 1] = right;
    return pad(t, p, 0.0);
  };
  if (len == 0) return zeros(sizes, TensorOptions(g.dtype()).device(g.device()));
  Tensor spread = g;
  if (step > 1) {
    // [.., len, ..] -> [.., len, step, ..] (g then step - 1 zeros) -> [.., len * step, ..]:
    // g[k] lands at k * step.
    Shape s = g.sizes();
    s[dim] = len * step;
    spread = reshape(pad_dim(unsqueeze(g, dim + 1), dim + 1, 0, step - 1), s);
  }
  // Place at `start`; a negative right pad crops the trailing zeros past the end.
  return pad_dim(spread, dim, start, size - start - spread.size(dim));
}

// ---- pointwise ---------------------------------------------------------------------------

Grads gelu_backward(const GradContext& c) {
  const Tensor& x = c.in(0);
  const Tensor& g = c.grad();
  const bool tanh_approx =
      c.attrs.has("approximate") && c.attrs.as<std::string>("approximate") == "tanh";
  if (tanh_approx) {
    // FunctionsManual gelu_backward, approximate="tanh".
    const double kBeta = std::numbers::sqrt2 * std::numbers::inv_sqrtpi;  // sqrt(2 / pi)
    const double kKappa = 0.044715;
    Tensor x_sq = mul(x, x);
    Tensor inner = mul(add(x, mul(x_sq, x) * kKappa), Scalar(kBeta));
    Tensor t = tanh(inner);
    Tensor left_derivative = add(t, Scalar(1.0)) * 0.5;
    Tensor right_derivative =
        mul(mul(x * 0.5, (1.0 - mul(t, t))), add(x_sq * (3.0 * kKappa), Scalar(1.0))) * kBeta;
    return {mul(g, add(left_derivative, right_derivative))};
  }
  // d/dx x Phi(x) = Phi(x) + x phi(x).
  const double kAlpha = std::numbers::sqrt2 / 2.0;         // 1 / sqrt(2)
  const double kBeta = std::numbers::inv_sqrtpi * kAlpha;  // 1 / sqrt(2 pi)
  Tensor cdf = add(erf(x * kAlpha), Scalar(1.0)) * 0.5;
  Tensor pdf = exp(mul(x, x) * -0.5) * kBeta;
  return {mul(g, add(cdf, mul(x, pdf)))};
}

Grads pow_backward(const GradContext& c) {
  const Tensor& g = c.grad();
  const Tensor& a = c.in(0);
  const Tensor& b = c.in(1);
  Grads r(2);
  if (c.needs(0)) {
    // FunctionsManual pow_backward_self: 0 where the exponent is 0 (no 0 * inf). A
    // number exponent stays a number (b - 1 of two numbers would round to float32).
    if (b.is_wrapped_number()) {
      const double e = b.item<double>();
      r[0] = e == 0.0 ? zeros_like(g) : mul(g, pow(a, Scalar(e - 1.0)) * e);
    } else {
      Tensor d = mul(g, mul(b, pow(a, sub(b, Scalar(1.0)))));
      r[0] = where((b == 0.0), Scalar(0.0), d);
    }
  }
  if (c.needs(1)) {
    // pow_backward_exponent: 0 where the base is 0 and the exponent >= 0.
    Tensor cond = logical_and((a == 0.0), (b >= 0.0));
    r[1] = mul(g, where(cond, Scalar(0.0), mul(c.out(), log(a))));
  }
  return r;
}

namespace {
/// maximum / minimum: equal inputs share the gradient, the smaller (larger) one gets 0.
Grads extremum_backward(const GradContext& c, bool is_max) {
  const Tensor& a = c.in(0);
  const Tensor& b = c.in(1);
  const Tensor& g = c.grad();
  Tensor half = g * 0.5;
  Tensor tie = eq(a, b);
  Grads r(2);
  if (c.needs(0)) r[0] = where(tie, half, where(is_max ? lt(a, b) : gt(a, b), Scalar(0.0), g));
  if (c.needs(1)) r[1] = where(tie, half, where(is_max ? gt(a, b) : lt(a, b), Scalar(0.0), g));
  return r;
}

/// fmax / fmin: the gradient goes to the input the result came from (a NaN loses).
Grads fextremum_backward(const GradContext& c, bool is_max) {
  const Tensor& a = c.in(0);
  const Tensor& b = c.in(1);
  const Tensor& g = c.grad();
  Tensor a_wins = logical_or(is_max ? ge(a, b) : le(a, b), isnan(b));
  Grads r(2);
  if (c.needs(0)) r[0] = keep_where(a_wins, g);
  if (c.needs(1)) r[1] = where(a_wins, Scalar(0.0), g);
  return r;
}
}  // namespace

Grads maximum_backward(const GradContext& c) { return extremum_backward(c, true); }
Grads minimum_backward(const GradContext& c) { return extremum_backward(c, false); }
Grads fmax_backward(const GradContext& c) { return fextremum_backward(c, true); }
Grads fmin_backward(const GradContext& c) { return fextremum_backward(c, false); }

Grads clamp_backward(const GradContext& c) {
  // FunctionsManual clamp_backward_min_max.
  const Tensor& x = c.in(0);
  const Tensor& lo = c.in(1);
  const Tensor& hi = c.in(2);
  const Tensor& g = c.grad();
  Grads r(3);
  if (c.needs(0)) r[0] = keep_where(logical_and(ge(x, lo), le(x, hi)), g);
  if (c.needs(1)) r[1] = keep_where(logical_and(lt(x, lo), lt(lo, hi)), g);
  if (c.needs(2)) r[2] = keep_where(logical_or(gt(x, hi), lt(hi, lo)), g);
  return r;
}

Grads clamp_min_backward(const GradContext& c) {
  const Tensor& x = c.in(0);
  const Tensor& lo = c.in(1);
  Grads r(2);
  if (c.needs(0)) r[0] = keep_where(ge(x, lo), c.grad());
  if (c.needs(1)) r[1] = keep_where(lt(x, lo), c.grad());
  return r;
}

Grads clamp_max_backward(const GradContext& c) {
  const Tensor& x = c.in(0);
  const Tensor& hi = c.in(1);
  Grads r(2);
  if (c.needs(0)) r[0] = keep_where(le(x, hi), c.grad());
  if (c.needs(1)) r[1] = keep_where(gt(x, hi), c.grad());
  return r;
}

// ---- reductions ------------------------------------------------------------------------------

Grads sum_backward(const GradContext& c) {
  return {unreduce(c.grad(), c.in_sizes(0), attr_dims(c.attrs), attr_keepdim(c.attrs))};
}

Grads mean_backward(const GradContext& c) {
  const Shape& sizes = c.in_sizes(0);
  const auto& dims = attr_dims(c.attrs);
  Tensor g = unreduce(c.grad(), sizes, dims, attr_keepdim(c.attrs));
  return {div(g, Scalar(static_cast<double>(reduced_count(sizes, dims))))};
}

Grads prod_backward(const GradContext& c) {
  // The product of the other elements: y / x where no element is 0; with one zero,
  // the product of the rest at the zero and 0 elsewhere; with two or more, 0.
  const auto& dims = attr_dims(c.attrs);
  const bool keepdim = attr_keepdim(c.attrs);
  const Tensor& y = c.out();
  Tensor x = to_dtype(c.in(0), y.dtype());
  const Shape& sizes = x.sizes();
  Tensor g = unreduce(c.grad(), sizes, dims, keepdim);
  Tensor yx = unreduce(y, sizes, dims, keepdim);
  Tensor is_zero = (x == 0.0);
  Tensor zeros_in = unreduce(sum(is_zero, dims, true), sizes, dims, true);
  Tensor others = unreduce(prod_over(where(is_zero, Scalar(1.0), x), dims), sizes, dims, true);
  Tensor no_zero = mul(g, div(yx, x));
  Tensor one_zero = where(logical_and((zeros_in == 1), is_zero), mul(g, others), Scalar(0.0));
  return {where((zeros_in == 0), no_zero, one_zero)};
}

Grads amax_amin_backward(const GradContext& c) {
  // FunctionsManual scale_grad_by_count: ties share the gradient evenly.
  const auto& dims = attr_dims(c.attrs);
  const bool keepdim = attr_keepdim(c.attrs);
  const Tensor& x = c.in(0);
  Tensor mask = eq(x, unreduce(c.out(), x.sizes(), dims, keepdim));
  Tensor count = unreduce(sum(mask, dims, true), x.sizes(), dims, true);
  Tensor g = unreduce(c.grad(), x.sizes(), dims, keepdim);
  return {mul(div(g, count), mask)};
}

Grads max_min_dim_backward(const GradContext& c) {
  // value_selecting_reduction_backward: the gradient scattered to the indices.
  const int64_t d = attr_dims(c.attrs).at(0);
  const bool keepdim = attr_keepdim(c.attrs);
  const Shape& sizes = c.in_sizes(0);
  const Tensor& idx = c.out(1);
  Tensor g = c.grad(0);
  if (sizes.empty()) return {g};  // a 0-dim input is its own max
  Tensor idx_k = keepdim ? idx : unsqueeze(idx, d);
  Tensor g_k = keepdim ? g : unsqueeze(g, d);
  Shape pos_shape(sizes.size(), 1);
  pos_shape[d] = sizes[d];
  Tensor pos = reshape(arange(sizes[d], TensorOptions(DType::Int64).device(g.device())), pos_shape);
  return {keep_where(eq(pos, idx_k), expand(g_k, sizes))};
}

Grads var_backward(const GradContext& c) {
  return {var_grad(c.grad(), c.in(0), attr_dims(c.attrs), c.attrs.as<double>("correction"),
                   attr_keepdim(c.attrs))};
}

Grads std_backward(const GradContext& c) {
  // std_backward: var_backward(grad / (2 std)), 0 where std is 0.
  const Tensor& y = c.out();
  Tensor g = where((y == 0.0), Scalar(0.0), div(c.grad(), mul(y, Scalar(2.0))));
  return {var_grad(g, c.in(0), attr_dims(c.attrs), c.attrs.as<double>("correction"),
                   attr_keepdim(c.attrs))};
}

Grads var_mean_backward(const GradContext& c) {
  const auto& dims = attr_dims(c.attrs);
  const bool keepdim = attr_keepdim(c.attrs);
  const Tensor& x = c.in(0);
  Tensor gv = var_grad(c.grad(0), x, dims, c.attrs.as<double>("correction"), keepdim);
  Tensor gm = div(unreduce(c.grad(1), x.sizes(), dims, keepdim),
                  Scalar(static_cast<double>(reduced_count(x.sizes(), dims))));
  return {add(gv, gm)};
}

Grads logsumexp_backward(const GradContext& c) {
  // logsumexp_backward: grad * exp(x - result).
  const auto& dims = attr_dims(c.attrs);
  const bool keepdim = attr_keepdim(c.attrs);
  const Tensor& x = c.in(0);
  Tensor y = unreduce(c.out(), x.sizes(), dims, keepdim);
  return {mul(unreduce(c.grad(), x.sizes(), dims, keepdim), exp(sub(x, y)))};
}

Grads cumsum_backward(const GradContext& c) {
  // The reversed cumulative sum of the gradient (cumsum_backward flips, sums, flips).
  const Tensor& g = c.grad();
  if (g.dim() == 0) return {g};
  const int64_t d = attr_dims(c.attrs).at(0);
  const int64_t n = g.size(d);
  Tensor rev = arange(n - 1, -1, -1, TensorOptions(DType::Int64).device(g.device()));
  return {index_select(cumsum(index_select(g, d, rev), d), d, rev)};
}

// ---- views --------------------------------------------------------------------------------------

Grads reshape_backward(const GradContext& c) { return {reshape(c.grad(), c.in_sizes(0))}; }

Grads permute_backward(const GradContext& c) {
  const auto& dims = c.attrs.as<std::vector<int64_t>>("dims");
  std::vector<int64_t> inverse(dims.size());
  for (size_t i = 0; i < dims.size(); ++i) inverse[dims[i]] = static_cast<int64_t>(i);
  return {permute(c.grad(), inverse)};
}

Grads transpose_backward(const GradContext& c) {
  return {transpose(c.grad(), attr_i64(c.attrs, "dim0"), attr_i64(c.attrs, "dim1"))};
}

Grads t_backward(const GradContext& c) { return {t(c.grad())}; }

Grads expand_backward(const GradContext& c) { return {sum_to(c.grad(), c.in_sizes(0))}; }

Grads narrow_backward(const GradContext& c) {
  return {slice_backward(c.grad(), c.in_sizes(0), attr_i64(c.attrs, "dim"),
                         attr_i64(c.attrs, "start"), 1)};
}

Grads slice_view_backward(const GradContext& c) {
  return {slice_backward(c.grad(), c.in_sizes(0), attr_i64(c.attrs, "dim"),
                         attr_i64(c.attrs, "start"), attr_i64(c.attrs, "step"))};
}

Grads select_backward(const GradContext& c) {
  const int64_t d = attr_i64(c.attrs, "dim");
  return {slice_backward(unsqueeze(c.grad(), d), c.in_sizes(0), d, attr_i64(c.attrs, "index"), 1)};
}

// ---- data movement ----------------------------------------------------------------------------

Grads index_select_backward(const GradContext& c) {
  // index_select_backward: index_add of the gradient, as a scatter_add.
  const Tensor& index = c.in(1);
  const Tensor& g = c.grad();
  const OutMeta& m = c.input_meta[0];
  if (m.sizes.empty()) return {sum_to(g, m.sizes)};  // every index is 0
  const int64_t d = attr_i64(c.attrs, "dim");
  Shape idx_shape(m.sizes.size(), 1);
  idx_shape[d] = index.numel();
  Tensor idx = expand(reshape(index, idx_shape), g.sizes());
  return {scatter_add(zeros(m.sizes, TensorOptions(g.dtype()).device(m.device)), d, idx, g),
          Tensor()};
}

Grads gather_backward(const GradContext& c) {
  const Tensor& index = c.in(1);
  const Tensor& g = c.grad();
  const OutMeta& m = c.input_meta[0];
  if (m.sizes.empty()) return {sum_to(g, m.sizes), Tensor()};
  const int64_t d = attr_i64(c.attrs, "dim");
  // One index per line, over the input's whole extent in the other dims
  // (cross_entropy's targets): an element's gradient is its line's where the
  // index names it, else 0: a pointwise where that the compiler fuses, in
  // place of a scatter_add into zeros (the same values, but for the sign of a
  // zero gradient).
  const int64_t nd = static_cast<int64_t>(m.sizes.size());
  bool one_per_line = index.dim() == nd && index.size(d) == 1;
  for (int64_t i = 0; i < nd && one_per_line; ++i)
    one_per_line = i == d || index.size(i) == m.sizes[static_cast<size_t>(i)];
  if (one_per_line) {
    Shape along(static_cast<size_t>(nd), 1);
    along[static_cast<size_t>(d)] = m.sizes[static_cast<size_t>(d)];
    const Tensor positions = reshape(arange(0, m.sizes[static_cast<size_t>(d)], 1,
                                            TensorOptions(index.dtype()).device(m.device)),
                                     along);
    return {where(eq(index, positions), g, Scalar(0)), Tensor()};
  }
  return {scatter_add(zeros(m.sizes, TensorOptions(g.dtype()).device(m.device)), d, index, g),
          Tensor()};
}

Grads scatter_add_backward(const GradContext& c) {
  const Tensor& g = c.grad();
  Grads r(3);
  if (c.needs(0)) r[0] = g;
  if (c.needs(2)) r[2] = gather(g, attr_i64(c.attrs, "dim"), c.in(1));
  return r;
}

Grads cat_backward(const GradContext& c) {
  const Tensor& g = c.grad();
  const int64_t d = attr_i64(c.attrs, "dim");
  Grads r(c.input_meta.size());
  int64_t offset = 0;
  for (size_t i = 0; i < c.input_meta.size(); ++i) {
    const Shape& s = c.input_meta[i].sizes;
    if (s.size() == 1 && s[0] == 0 && g.dim() != 1) continue;  // skipped legacy empty input
    const int64_t len = s[d];
    if (c.needs(i)) r[i] = narrow(g, d, offset, len);
    offset += len;
  }
  return r;
}

Grads stack_backward(const GradContext& c) {
  const int64_t d = attr_i64(c.attrs, "dim");
  Grads r(c.input_meta.size());
  for (size_t i = 0; i < r.size(); ++i)
    if (c.needs(i)) r[i] = select(c.grad(), d, static_cast<int64_t>(i));
  return r;
}

Grads pad_backward(const GradContext& c) {
  // Padding's inverse is cropping: pad with the negated amounts.
  std::vector<int64_t> p = c.attrs.as<std::vector<int64_t>>("pad");
  for (auto& v : p) v = -v;
  return {pad(c.grad(), p, 0.0)};
}

Grads tril_backward(const GradContext& c) {
  return {tril(c.grad(), attr_i64(c.attrs, "diagonal"))};
}

Grads triu_backward(const GradContext& c) {
  return {triu(c.grad(), attr_i64(c.attrs, "diagonal"))};
}

Grads masked_fill_backward(const GradContext& c) {
  return {masked_fill(c.grad(), c.in(1), Scalar(0.0)), Tensor()};
}

Grads embedding_backward(const GradContext& c) {
  // embedding_dense_backward: rows of the gradient added into the rows they came from
  // (repeated indices accumulate).
  const Tensor& indices = c.in(1);
  const Tensor& g = c.grad();
  const OutMeta& m = c.input_meta[0];
  const int64_t n = indices.numel(), dim = m.sizes[1];
  Tensor rows = reshape(g, {n, dim});
  Tensor idx = expand(reshape(indices, {n, 1}), {n, dim});
  return {scatter_add(zeros(m.sizes, TensorOptions(g.dtype()).device(m.device)), 0, idx, rows),
          Tensor()};
}

Grads index_put_backward(const GradContext& c) {
  // self: the gradient with the written rows zeroed; values: the gradient of those rows.
  const Tensor& indices = c.in(1);
  const Tensor& g = c.grad();
  Grads r(3);
  if (c.needs(0)) {
    Tensor kept = clone(g);
    kept.index_put_(indices, zeros({}, TensorOptions(g.dtype()).device(g.device())));
    r[0] = kept;
  }
  if (c.needs(2)) {
    const Shape& self_sizes = c.in_sizes(0);
    const bool is_mask = indices.dtype() == DType::Bool;
    const int64_t k = is_mask ? indices.dim() : 1;
    Shape rest(self_sizes.begin() + k, self_sizes.end());
    int64_t nrows = 1;
    for (int64_t i = 0; i < k; ++i) nrows *= self_sizes[i];
    Shape flat{nrows};
    flat.insert(flat.end(), rest.begin(), rest.end());
    Tensor rows;
    if (is_mask) {
      // The selected rows, in order (their positions are data: read here).
      std::vector<int64_t> pos;
      const std::vector<bool> m = indices.to_vector<bool>();
      for (int64_t p = 0; p < nrows; ++p)
        if (m[p]) pos.push_back(p);
      const int64_t n = static_cast<int64_t>(pos.size());
      rows = index_select(reshape(g, flat), 0,
                          from_vector(pos, {n}, TensorOptions(DType::Int64).device(g.device())));
    } else {
      Shape target = indices.sizes();
      target.insert(target.end(), rest.begin(), rest.end());
      Tensor flat_idx = reshape(indices, {-1});
      flat_idx = where((flat_idx < 0), add(flat_idx, Scalar(self_sizes[0])), flat_idx);
      rows = reshape(index_select(g, 0, flat_idx), target);
    }
    r[2] = rows;
  }
  return r;
}

// ---- matmul and nn composites ------------------------------------------------------------------

Grads matmul_backward(const GradContext& c) {
  // torch.matmul as batched mm: vectors become matrices (a: [1, n], b: [n, 1]), the
  // gradients are g @ b^T and a^T @ g summed over broadcast batch dims.
  Tensor a = c.in(0), b = c.in(1), g = c.grad();
  const bool a_vec = a.dim() == 1, b_vec = b.dim() == 1;
  if (a_vec) {
    a = unsqueeze(a, 0);
    g = unsqueeze(g, -2 + (b_vec ? 1 : 0));
  }
  if (b_vec) {
    b = unsqueeze(b, 1);
    g = unsqueeze(g, -1);
  }
  Grads r(2);
  if (c.needs(0)) {
    Tensor ga = sum_to(matmul(g, transpose(b, -1, -2)), a.sizes());
    r[0] = a_vec ? reshape(ga, c.in_sizes(0)) : ga;
  }
  if (c.needs(1)) {
    Tensor gb = sum_to(matmul(transpose(a, -1, -2), g), b.sizes());
    r[1] = b_vec ? reshape(gb, c.in_sizes(1)) : gb;
  }
  return r;
}

Grads linear_backward(const GradContext& c) {
  // y = x W^T + b: dx = g W, dW = g^T x over all leading dims, db = g summed.
  const Tensor& x = c.in(0);
  const Tensor& w = c.in(1);
  const Tensor& g = c.grad();
  Grads r(c.input_meta.size());
  if (w.dim() == 1) {  // y = x . w (+ b): a matmul with a vector
    if (c.needs(0)) r[0] = mul(unsqueeze(g, -1), w);
    if (c.needs(1)) r[1] = sum_to(mul(unsqueeze(g, -1), x), w.sizes());
  } else {
    if (c.needs(0)) r[0] = matmul(g, w);
    if (c.needs(1)) {
      // x's and g's leading dims as rows, counted: a -1 would be ambiguous
      // where in_features or out_features is 0.
      int64_t rows = 1;
      for (int64_t d = 0; d + 1 < x.dim(); ++d) rows *= x.size(d);
      r[1] = matmul(t(reshape(g, {rows, w.size(0)})), reshape(x, {rows, w.size(1)}));
    }
  }
  if (r.size() > 2 && c.needs(2)) r[2] = sum_to(g, c.in_sizes(2));
  return r;
}

Grads softmax_backward(const GradContext& c) {
  // _softmax_backward_data: y (g - sum(g y)).
  const Tensor& y = c.out();
  const int64_t d = y.dim() == 0 ? 0 : attr_i64(c.attrs, "dim");
  Tensor g = to_dtype(c.grad(), y.dtype());
  if (y.dim() == 0) return {mul(g, Scalar(0.0))};
  Tensor gy = mul(g, y);
  return {sub(gy, mul(y, sum(gy, {d}, true)))};
}

Grads log_softmax_backward(const GradContext& c) {
  // _log_softmax_backward_data: g - exp(y) sum(g).
  const Tensor& y = c.out();
  Tensor g = to_dtype(c.grad(), y.dtype());
  if (y.dim() == 0) return {mul(g, Scalar(0.0))};
  const int64_t d = attr_i64(c.attrs, "dim");
  return {sub(g, mul(exp(y), sum(g, {d}, true)))};
}

Grads layer_norm_backward(const GradContext& c) {
  // native_layer_norm_backward, with mean and 1/std recomputed from x.
  const Tensor& x = c.in(0);
  const bool has_w = c.attrs.as<bool>("has_weight"), has_b = c.attrs.as<bool>("has_bias");
  const Tensor w = has_w ? c.in(1) : Tensor();
  const auto& ns = c.attrs.as<std::vector<int64_t>>("normalized_shape");
  const std::vector<int64_t> dims = trailing_dims(x.dim(), ns.size());
  Tensor xc = upcast(x), g = upcast(c.grad());
  auto [var, mu] = var_mean(xc, dims, /*correction=*/0, /*keepdim=*/true);
  Tensor rstd = rsqrt(add(var, Scalar(c.attrs.as<double>("eps"))));
  Tensor xhat = mul(sub(xc, mu), rstd);
  Grads r(c.input_meta.size());
  if (c.needs(0)) {
    Tensor gxhat = has_w ? mul(g, upcast(w)) : g;
    Tensor inner =
        sub(sub(gxhat, mean(gxhat, dims, true)), mul(xhat, mean(mul(gxhat, xhat), dims, true)));
    r[0] = mul(rstd, inner);
  }
  size_t next = 1;
  if (has_w) {
    if (c.needs(next)) r[next] = sum_to(mul(g, xhat), c.in_sizes(next));
    ++next;
  }
  if (has_b && c.needs(next)) r[next] = sum_to(g, c.in_sizes(next));
  return r;
}

Grads rms_norm_backward(const GradContext& c) {
  // y = x r w with r = 1/sqrt(mean(x^2) + eps): dx = r (gw - xhat mean(gw xhat)).
  const Tensor& x = c.in(0);
  const bool has_w = c.attrs.as<bool>("has_weight");
  const auto& ns = c.attrs.as<std::vector<int64_t>>("normalized_shape");
  const std::vector<int64_t> dims = trailing_dims(x.dim(), ns.size());
  Tensor xc = upcast(x), g = upcast(c.grad());
  Tensor rr = rsqrt(add(mean(mul(xc, xc), dims, true), Scalar(c.attrs.as<double>("eps"))));
  Tensor xhat = mul(xc, rr);
  Grads r(c.input_meta.size());
  if (c.needs(0)) {
    Tensor gxh = has_w ? mul(g, upcast(c.in(1))) : g;
    r[0] = mul(rr, sub(gxh, mul(xhat, mean(mul(gxh, xhat), dims, true))));
  }
  if (has_w && c.needs(1)) r[1] = sum_to(mul(g, xhat), c.in_sizes(1));
  return r;
}

Grads mse_loss_backward(const GradContext& c) {
  // mse_loss_backward: 2 (input - target) grad, / N for reduction="mean".
  const Tensor& input = c.in(0);
  const Tensor& target = c.in(1);
  const std::string& reduction = c.attrs.as<std::string>("reduction");
  Tensor d = sub(input, target);
  Tensor gi = mul(d, c.grad()) * 2.0;
  if (reduction == "mean") gi = div(gi, Scalar(static_cast<double>(d.numel())));
  Grads r(2);
  if (c.needs(0)) r[0] = gi;
  if (c.needs(1)) r[1] = neg(gi);
  return r;
}

}  // namespace smelt::detail
