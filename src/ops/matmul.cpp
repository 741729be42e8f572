// matmul with torch.matmul semantics: one "matmul" node (an Extern op) whose
// eager kernel is one strided batched GEMM of the device's backend.
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

}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b) {
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

  const int64_t m = da == 1 ? 1 : a.size(-2);
  const int64_t k = a.size(-1);
  const int64_t kb = db == 1 ? b.size(0) : b.size(-2);
  const int64_t n = db == 1 ? 1 : b.size(-1);
  if (da == 1 && db == 1) {
    SMELT_CHECK(k == kb,
                "matmul: 1-D operands of shapes {} and {} have different lengths ({} vs {}); a "
                "dot product needs equal lengths",
                detail::shape_str(a.sizes()), detail::shape_str(b.sizes()), k, kb);
  } else {
    SMELT_CHECK(k == kb,
                "matmul: shapes {} and {} cannot be multiplied ({}x{} and {}x{}): the last dim of "
                "the first operand must equal the {} dim of the second",
                detail::shape_str(a.sizes()), detail::shape_str(b.sizes()), m, k, kb, n,
                db == 1 ? "only" : "second-to-last");
  }
  const Shape a_batch(a.sizes().begin(), a.sizes().end() - std::min<int64_t>(da, 2));
  const Shape b_batch(b.sizes().begin(), b.sizes().end() - std::min<int64_t>(db, 2));
  const Shape batch = broadcast_batch(a_batch, b_batch, a, b);
  Shape out_shape = batch;
  if (da > 1) out_shape.push_back(m);
  if (db > 1) out_shape.push_back(n);

  return detail::run_op1(
      "matmul", {a, b}, {}, {out_shape, a.dtype(), a.device()},
      [=](const std::vector<Tensor>& outs) {
        const Tensor& c = outs[0];
        const int64_t nb = detail::shape_numel(batch);
        if (nb == 0 || m == 0 || n == 0) return;
        const Shape a_bstr(a.strides().begin(), a.strides().end() - std::min<int64_t>(da, 2));
        const Shape b_bstr(b.strides().begin(), b.strides().end() - std::min<int64_t>(db, 2));
        const Shape as = batch_strides(batch, a_batch, a_bstr);
        const Shape bs = batch_strides(batch, b_batch, b_bstr);
        const Shape cs = detail::contiguous_strides(batch);
        std::vector<backend::GemmBatchDim> dims(batch.size());
        for (size_t d = 0; d < batch.size(); ++d)
          dims[d] = {batch[d], as[d], bs[d], cs[d] * m * n, 0};
        backend::Backend& be = backend::backend(a.device());
        backend::Gemm g;
        g.device = a.device();
        g.dtype = a.dtype();
        g.m = m;
        g.n = n;
        g.k = k;
        g.a = {a.data_ptr(), 0, da == 1 ? k : a.stride(-2), a.stride(-1)};
        g.b = {b.data_ptr(), 0, db == 1 ? b.stride(0) : b.stride(-2), db == 1 ? 1 : b.stride(-1)};
        g.c = c.data_ptr();
        g.c_row_stride = n;
        backend::gemm_over_batch(be, g, dims, be.current_stream(a.device()));
      });
}

}  // namespace smelt
