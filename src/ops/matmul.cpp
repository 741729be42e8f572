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

/// Element offset of every batch (row-major over `batch`) of an operand whose
/// batch dims are `sizes`/`strides` (trailing-aligned, broadcast where size 1).
std::vector<int64_t> batch_offsets(const Shape& batch, const Shape& sizes, const Shape& strides) {
  const int64_t nb = detail::shape_numel(batch);
  const size_t nd = batch.size();
  Shape st(nd, 0);
  for (size_t i = 0; i < sizes.size(); ++i) {
    const size_t j = nd - sizes.size() + i;
    st[j] = sizes[i] == 1 ? 0 : strides[i];
  }
  std::vector<int64_t> off(nb, 0);
  Shape idx(nd, 0);
  int64_t cur = 0;
  for (int64_t b = 0; b < nb; ++b) {
    off[b] = cur;
    for (size_t d = nd; d-- > 0;) {
      if (++idx[d] < batch[d]) {
        cur += st[d];
        break;
      }
      cur -= st[d] * (batch[d] - 1);
      idx[d] = 0;
    }
  }
  return off;
}

/// The common stride of `off` when it is an arithmetic progression.
bool uniform_stride(const std::vector<int64_t>& off, int64_t* stride) {
  *stride = off.size() > 1 ? off[1] - off[0] : 0;
  for (size_t i = 1; i < off.size(); ++i)
    if (off[i] - off[i - 1] != *stride) return false;
  return true;
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
        const std::vector<int64_t> aoff = batch_offsets(batch, a_batch, a_bstr);
        const std::vector<int64_t> boff = batch_offsets(batch, b_batch, b_bstr);
        const int64_t esz = static_cast<int64_t>(a.element_size());
        const char* ap = static_cast<const char*>(a.data_ptr());
        const char* bp = static_cast<const char*>(b.data_ptr());
        char* cp = static_cast<char*>(c.data_ptr());
        backend::Backend& be = backend::backend(a.device());
        const backend::Stream stream = be.current_stream(a.device());
        backend::Gemm g;
        g.device = a.device();
        g.dtype = a.dtype();
        g.m = m;
        g.n = n;
        g.k = k;
        g.a = {ap, 0, da == 1 ? k : a.stride(-2), a.stride(-1)};
        g.b = {bp, 0, db == 1 ? b.stride(0) : b.stride(-2), db == 1 ? 1 : b.stride(-1)};
        g.c = cp;
        g.c_row_stride = n;
        int64_t as = 0, bs = 0;
        const bool a_uniform = uniform_stride(aoff, &as);
        const bool b_uniform = uniform_stride(boff, &bs);
        // B shared by every batch and A's batches laid out as one tall matrix:
        // a single (nb*m) x k @ k x n product (as PyTorch folds it).
        if (nb > 1 && b_uniform && bs == 0 && a_uniform && as == m * g.a.row_stride) {
          g.m = nb * m;
          be.gemm(g, stream);
          return;
        }
        g.c_batch_stride = m * n;
        if (a_uniform && b_uniform) {
          g.batch = nb;
          g.a.batch_stride = as;
          g.b.batch_stride = bs;
          be.gemm(g, stream);
          return;
        }
        for (int64_t i = 0; i < nb; ++i) {
          backend::Gemm gi = g;
          gi.a.data = ap + aoff[i] * esz;
          gi.b.data = bp + boff[i] * esz;
          gi.c = cp + i * m * n * esz;
          be.gemm(gi, stream);
        }
      });
}

}  // namespace smelt
