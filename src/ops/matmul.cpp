// matmul with torch.matmul semantics: one "matmul" node (an Extern op) whose
// eager kernel is one strided batched GEMM of the device's backend.
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "core/tensor_impl.h"
#include "ops/dispatch.h"
#include "smelt/ops.h"

namespace smelt {

namespace {

/// Broadcasts two batch shapes (trailing-aligned); Error naming both operand shapes.
Shape broadcast_batch(const Shape& a, const Shape& b, const Tensor& ta, const Tensor& tb) {
  const size_t n = std::max(a.size(), b.size());
  Shape out(n, 1);
  for (size_t i = 0; i < n; ++i) {
    const int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    const int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    SMELT_CHECK(da == db || da == 1 || db == 1,
                "matmul: the batch dimensions of shapes {} and {} cannot be broadcast ({} vs {} at "
                "batch dim {}); batch dims must be equal or 1",
                detail::shape_str(ta.sizes()), detail::shape_str(tb.sizes()), da, db, i);
    out[i] = da == 1 ? db : da;
  }
  return out;
}

/// The stride of each dim of `batch` of an operand whose batch dims are
/// `sizes`/`strides` (trailing-aligned; 0 where it is broadcast).
Shape batch_strides(const Shape& batch, const Shape& sizes, const Shape& strides) {
  Shape st(batch.size(), 0);
  for (size_t i = 0; i < sizes.size(); ++i)
    st[batch.size() - sizes.size() + i] = sizes[i] == 1 ? 0 : strides[i];
  return st;
}

/// matmul's operands, checked, and the product's shape: batch dims
/// (broadcast), m x k times k x n.
struct MatmulShape {
  Shape a_batch, b_batch, batch, out;
  int64_t m = 0, k = 0, n = 0;
};

MatmulShape matmul_shape(const Tensor& a, const Tensor& b) {
  SMELT_CHECK(a.defined() && b.defined(), "matmul: an operand is an undefined tensor");
  const int64_t da = a.dim(), db = b.dim();
  SMELT_CHECK(da >= 1 && db >= 1,
              "matmul: both arguments need to be at least 1-D, but got shapes {} and {} ({}-D and "
              "{}-D); use mul() to multiply by a scalar",
              detail::shape_str(a.sizes()), detail::shape_str(b.sizes()), da, db);
  SMELT_CHECK(a.dtype() == b.dtype(),
              "matmul: expected both operands to have the same dtype, but got {} and {} (shapes "
              "{} and {}); convert one with .to({})",
              dtype_name(a.dtype()), dtype_name(b.dtype()), detail::shape_str(a.sizes()),
              detail::shape_str(b.sizes()), dtype_name(promote_types(a.dtype(), b.dtype())));
  SMELT_CHECK(a.dtype() != DType::Bool,
              "matmul: bool operands are not supported (shapes {} and {}); convert them with "
              ".to(smelt::int64) or .to(smelt::float32)",
              detail::shape_str(a.sizes()), detail::shape_str(b.sizes()));
  SMELT_CHECK(a.device() == b.device(),
              "matmul: operands are on different devices ({} and {}); move one with .to(device)",
              a.device().str(), b.device().str());

  MatmulShape s;
  s.m = da == 1 ? 1 : a.size(-2);
  s.k = a.size(-1);
  const int64_t kb = db == 1 ? b.size(0) : b.size(-2);
  s.n = db == 1 ? 1 : b.size(-1);
  if (da == 1 && db == 1) {
    SMELT_CHECK(s.k == kb,
                "matmul: 1-D operands of shapes {} and {} have different lengths ({} vs {}); a "
                "dot product needs equal lengths",
                detail::shape_str(a.sizes()), detail::shape_str(b.sizes()), s.k, kb);
  } else {
    SMELT_CHECK(s.k == kb,
                "matmul: shapes {} and {} cannot be multiplied ({}x{} and {}x{}): the last dim of "
                "the first operand must equal the {} dim of the second",
                detail::shape_str(a.sizes()), detail::shape_str(b.sizes()), s.m, s.k, kb, s.n,
                db == 1 ? "only" : "second-to-last");
  }
  s.a_batch.assign(a.sizes().begin(), a.sizes().end() - std::min<int64_t>(da, 2));
  s.b_batch.assign(b.sizes().begin(), b.sizes().end() - std::min<int64_t>(db, 2));
  s.batch = broadcast_batch(s.a_batch, s.b_batch, a, b);
  s.out = s.batch;
  if (da > 1) s.out.push_back(s.m);
  if (db > 1) s.out.push_back(s.n);
  return s;
}

/// The product a @ b at batch index 0 and its batch dims, as the backend's
/// strided batched GEMM takes them, for operands of strides `as_full` and
/// `bs_full` (a's and b's own, or those of their contiguous copies); no
/// pointers, device or dtype (run_gemm sets them).
struct BatchedGemm {
  backend::Gemm gemm;
  std::vector<backend::GemmBatchDim> dims;
};
BatchedGemm batched_gemm(const Shape& as_full, const Shape& bs_full, const MatmulShape& s) {
  const int64_t da = static_cast<int64_t>(as_full.size()),
                db = static_cast<int64_t>(bs_full.size());
  const Shape a_bstr(as_full.begin(), as_full.end() - std::min<int64_t>(da, 2));
  const Shape b_bstr(bs_full.begin(), bs_full.end() - std::min<int64_t>(db, 2));
  const Shape as = batch_strides(s.batch, s.a_batch, a_bstr);
  const Shape bs = batch_strides(s.batch, s.b_batch, b_bstr);
  const Shape cs = detail::contiguous_strides(s.batch);
  BatchedGemm r;
  r.dims.resize(s.batch.size());
  for (size_t d = 0; d < s.batch.size(); ++d)
    r.dims[d] = {s.batch[d], as[d], bs[d], cs[d] * s.m * s.n, 0};
  backend::Gemm& g = r.gemm;
  g.m = s.m;
  g.n = s.n;
  g.k = s.k;
  g.a = {nullptr, 0, da == 1 ? s.k : as_full[da - 2], as_full[da - 1]};
  g.b = {nullptr, 0, db == 1 ? bs_full[0] : bs_full[db - 2], db == 1 ? 1 : bs_full[db - 1]};
  g.c_row_stride = s.n;
  return r;
}

/// Whether a batch copy of `t` keeps its matrices column-major: a transposed
/// view (k^T of attention's scores q @ k^T), whose rows are t's columns and
/// whose column stride is 1. Its copy then moves runs of the original rows
/// (coalesced, vectorizable) instead of transposing them, and the GEMM reads
/// the matrices transposed, as it reads the view. Not for float64: the CPU's
/// float64 GEMM (cblas_dgemm, one call per matrix) rounds a transposed
/// operand's products differently (odd sizes: 282 of 756 batched products
/// measured differed from those of the contiguous operands), and the
/// contiguous copy keeps matmul's float64 values those of the contiguous
/// operands.
bool column_major_copy(const Tensor& t) {
  const int64_t d = t.dim();
  return d >= 2 && t.dtype() != DType::Float64 && t.size(d - 1) > 1 && t.size(d - 2) > 1 &&
         t.stride(d - 2) == 1 && t.stride(d - 1) != 1;
}

/// The strides of dense_batch_copy(t).
Shape dense_batch_strides(const Tensor& t) {
  if (!column_major_copy(t)) return detail::contiguous_strides(t.sizes());
  const int64_t d = t.dim();
  Shape sizes = t.sizes();
  std::swap(sizes[d - 1], sizes[d - 2]);
  Shape st = detail::contiguous_strides(sizes);
  std::swap(st[d - 1], st[d - 2]);
  return st;
}

/// A copy of t whose batch dims combine into one stride: contiguous, or, for
/// a transposed view, contiguous in the transposed order (column_major_copy).
Tensor dense_batch_copy(const Tensor& t) {
  if (!column_major_copy(t)) return t.contiguous();
  return t.transpose(-1, -2).contiguous().transpose(-1, -2);
}

/// Backend::gemm calls of a @ b above which an operand whose batch dims do
/// not combine into one stride is copied first.
constexpr int64_t kMaxGemmCalls = 4;

/// a and b as matmul multiplies them: where their batch dims would cost more
/// than kMaxGemmCalls GEMM calls (attention's per-head views [B, H, T, D] of a
/// [B, T, H * D] projection: B calls of H products each), the operands copied
/// contiguous when that makes the product one strided batched call, as
/// PyTorch's matmul copies to fold the batch dims (reshape to [B * H, T, D]).
/// The copies are ops like any other: traced, they are nodes of the graph.
std::pair<Tensor, Tensor> batchable(const Tensor& a, const Tensor& b, const MatmulShape& s) {
  if (s.batch.size() < 2) return {a, b};
  // The calls with each operand as it is or as a dense copy, counted from
  // strides alone (nothing is copied until one is chosen).
  const Shape a_str = a.strides(), b_str = b.strides();
  const Shape a_dense = dense_batch_strides(a), b_dense = dense_batch_strides(b);
  auto calls = [&](bool copy_a, bool copy_b) {
    const BatchedGemm bg = batched_gemm(copy_a ? a_dense : a_str, copy_b ? b_dense : b_str, s);
    return backend::gemm_calls_over_batch(bg.gemm, bg.dims);
  };
  if (calls(false, false) <= kMaxGemmCalls) return {a, b};
  for (int which = 1; which <= 3; ++which) {  // a, then b, then both
    const bool copy_a = which & 1, copy_b = which & 2;
    if (calls(copy_a, copy_b) == 1)
      return {copy_a ? dense_batch_copy(a) : a, copy_b ? dense_batch_copy(b) : b};
  }
  return {a, b};
}

/// c (contiguous, s.out) = a @ b through the backend's strided batched GEMM,
/// with `epilogue` (a bias at most) applied by the GEMM before its one rounding.
void run_gemm(const Tensor& a, const Tensor& b, const Tensor& c, const MatmulShape& s,
              const backend::GemmEpilogue& epilogue) {
  const int64_t nb = detail::shape_numel(s.batch);
  if (nb == 0 || s.m == 0 || s.n == 0) return;
  BatchedGemm bg = batched_gemm(a.strides(), b.strides(), s);
  bg.gemm.device = a.device();
  bg.gemm.dtype = a.dtype();
  bg.gemm.a.data = a.data_ptr();
  bg.gemm.b.data = b.data_ptr();
  bg.gemm.c = c.data_ptr();
  bg.gemm.epilogue = epilogue;
  backend::Backend& be = backend::backend(a.device());
  backend::gemm_over_batch(be, bg.gemm, bg.dims, be.current_stream(a.device()));
}

}  // namespace

Tensor matmul(const Tensor& a_in, const Tensor& b_in) {
  const MatmulShape s = matmul_shape(a_in, b_in);
  const std::pair<Tensor, Tensor> ab = batchable(a_in, b_in, s);
  const Tensor &a = ab.first, &b = ab.second;
  return detail::run_op1("matmul", {a, b}, {}, {s.out, a.dtype(), a.device()},
                         [&](const std::vector<Tensor>& outs) { run_gemm(a, b, outs[0], s, {}); });
}

namespace detail {

Tensor linear_bias_epilogue(const Tensor& x, const Tensor& weight_t, const Tensor& bias) {
  const MatmulShape s = matmul_shape(x, weight_t);
  SMELT_INTERNAL_ASSERT(weight_t.dim() == 2 && bias.dim() == 1 && bias.size(0) == s.n &&
                            bias.is_contiguous() && bias.dtype() == x.dtype() &&
                            bias.device() == x.device(),
                        "linear_bias_epilogue: bias must be a contiguous [{}] {} vector on {}", s.n,
                        dtype_name(x.dtype()), x.device().str());
  return run_op1("linear", {x, weight_t, bias}, {}, {s.out, x.dtype(), x.device()},
                 [&](const std::vector<Tensor>& outs) {
                   backend::GemmEpilogue e;
                   e.bias = bias.data_ptr();
                   run_gemm(x, weight_t, outs[0], s, e);
                 });
}

}  // namespace detail

}  // namespace smelt
