// Data-movement ops that compute a new tensor (not views): index_select,
// gather, scatter_add, cat, stack, pad, tril, triu, masked_fill, and
// Tensor::index_put_.
// Each runs through detail::run_op1 so that smelt::compile can trace it; index
// values are validated before anything is written; the kernels are the
// backend's (copy, fill, index_select, gather, index_copy, triangle_zero).
#include <algorithm>

#include "backend/backend.h"
#include "core/tensor_impl.h"
#include "ops/dispatch.h"
#include "ops/index_check.h"
#include "ops/numbers.h"
#include "smelt/ops.h"

namespace smelt {

using detail::make_view;
using detail::shape_str;
using detail::wrap_dim;

namespace {

int64_t dims_product(const Shape& s, size_t begin, size_t end) {
  int64_t n = 1;
  for (size_t i = begin; i < end; ++i) n *= s[i];
  return n;
}

void check_index_dtype(const char* op, const Tensor& index) {
  SMELT_CHECK(index.dtype() == DType::Int64 || index.dtype() == DType::Int32,
              "{}: expected an int64 (or int32) index tensor, got dtype {}; convert it with "
              ".to(smelt::int64)",
              op, dtype_name(index.dtype()));
}

/// Index values as int64, read eagerly only to check them: empty for a tracer, and
/// for a device that checks them itself (CUDA: the kernel sets the deferred
/// error flag, raised at the next synchronization, so no op waits for it).
/// True when `from` broadcasts to `to` (trailing dims aligned, size-1 stretches).
bool broadcastable_to(const Shape& from, const Shape& to) {
  if (from.size() > to.size()) return false;
  const size_t off = to.size() - from.size();
  for (size_t i = 0; i < from.size(); ++i)
    if (from[i] != 1 && from[i] != to[off + i]) return false;
  return true;
}

Shape broadcast2(const Shape& a, const Shape& b, const char* op) {
  const size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t x = i + a.size() >= n ? a[i + a.size() - n] : 1;
    int64_t y = i + b.size() >= n ? b[i + b.size() - n] : 1;
    SMELT_CHECK(x == y || x == 1 || y == 1,
                "{}: shapes {} and {} cannot be broadcast together (size {} vs {} at dim {})", op,
                shape_str(a), shape_str(b), x, y, i);
    out[i] = x == 1 ? y : x;
  }
  return out;
}

/// Narrowed view of a contiguous output, used by kernels to place pieces.
Tensor out_slice(const Tensor& out, int64_t dim, int64_t start, int64_t length) {
  Shape sizes = out.sizes();
  sizes[dim] = length;
  return make_view(out, std::move(sizes), out.strides(),
                   out.storage_offset() + start * out.strides()[dim]);
}

}  // namespace

// ---- index_select / gather ------------------------------------------------------

Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index) {
  SMELT_CHECK(x.defined() && index.defined(), "index_select: undefined tensor argument");
  check_index_dtype("index_select", index);
  SMELT_CHECK(index.dim() <= 1,
              "index_select: index_select(): Index is supposed to be a vector, got index of "
              "shape {}",
              shape_str(index.sizes()));
  const int64_t d = wrap_dim(dim, x.dim(), "index_select");
  const int64_t size = x.dim() == 0 ? 1 : x.sizes()[d];
  detail::check_indices(index, size, [&](int64_t v) {
    return fmt::format(
        "index_select: index {} is out of bounds for dimension {} with size {} (input shape {}); "
        "indices must be in [0, {})",
        v, d, size, shape_str(x.sizes()), size);
  });
  Shape out_shape = x.sizes();
  if (x.dim() > 0)
    out_shape[d] = index.numel();
  else if (index.dim() == 1)
    out_shape = {index.numel()};
  return detail::run_op1("index_select", {x, index}, {{"dim", d}},
                         {out_shape, x.dtype(), x.device()}, [&](const std::vector<Tensor>& outs) {
                           backend::backend(x.device()).index_select(outs[0], x, d, index);
                         });
}

Tensor gather(const Tensor& x, int64_t dim, const Tensor& index) {
  SMELT_CHECK(x.defined() && index.defined(), "gather: undefined tensor argument");
  check_index_dtype("gather", index);
  const int64_t nd = x.dim();
  const int64_t d = wrap_dim(dim, nd, "gather");
  SMELT_CHECK(index.dim() == nd || (nd == 0 && index.dim() <= 1) || index.numel() == 0,
              "gather: Index tensor must have the same number of dimensions as input tensor "
              "(input shape {}, index shape {})",
              shape_str(x.sizes()), shape_str(index.sizes()));
  if (nd > 0 && index.dim() == nd) {
    for (int64_t i = 0; i < nd; ++i)
      SMELT_CHECK(i == d || index.sizes()[i] <= x.sizes()[i],
                  "gather: Size does not match at dimension {} expected index {} to be smaller "
                  "than self {} apart from dimension {}",
                  i, shape_str(index.sizes()), shape_str(x.sizes()), d);
  }
  // The backends check the index values as they gather (the CPU's in the same
  // pass over them: Backend::gather).
  return detail::run_op1("gather", {x, index}, {{"dim", d}}, {index.sizes(), x.dtype(), x.device()},
                         [&](const std::vector<Tensor>& outs) {
                           backend::backend(x.device()).gather(outs[0], x, d, index);
                         });
}

Tensor scatter_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src) {
  SMELT_CHECK(self.defined() && index.defined() && src.defined(),
              "scatter_add: undefined tensor argument");
  check_index_dtype("scatter_add", index);
  SMELT_CHECK(src.dtype() == self.dtype(),
              "scatter_add: Expected self.dtype to be equal to src.dtype (got {} and {}); convert "
              "src with .to(...)",
              dtype_name(self.dtype()), dtype_name(src.dtype()));
  SMELT_CHECK(self.device() == src.device() && self.device() == index.device(),
              "scatter_add: self, index and src must be on the same device");
  const int64_t nd = self.dim();
  const int64_t d = wrap_dim(dim, nd, "scatter_add");
  SMELT_CHECK(index.numel() == 0 ||
                  (index.dim() == std::max<int64_t>(nd, 1) && src.dim() == index.dim()) ||
                  (nd == 0 && index.dim() == 0 && src.dim() == 0),
              "scatter_add: Index tensor must have the same number of dimensions as self and src "
              "(self {}, index {}, src {})",
              shape_str(self.sizes()), shape_str(index.sizes()), shape_str(src.sizes()));
  if (index.numel() > 0 && nd > 0) {
    for (int64_t i = 0; i < nd; ++i) {
      SMELT_CHECK(index.sizes()[i] <= src.sizes()[i],
                  "scatter_add: Expected index {} to be smaller than src {} at every dimension",
                  shape_str(index.sizes()), shape_str(src.sizes()));
      SMELT_CHECK(i == d || index.sizes()[i] <= self.sizes()[i],
                  "scatter_add: Expected index {} to be smaller than self {} apart from "
                  "dimension {}",
                  shape_str(index.sizes()), shape_str(self.sizes()), d);
    }
  }
  const int64_t size = nd == 0 ? 1 : self.sizes()[d];
  detail::check_indices(index, size, [&](int64_t v) {
    return fmt::format("scatter_add: index {} is out of bounds for dimension {} with size {}", v, d,
                       size);
  });
  return detail::run_op1("scatter_add", {self, index, src}, {{"dim", d}},
                         {self.sizes(), self.dtype(), self.device()},
                         [&](const std::vector<Tensor>& outs) {
                           backend::Backend& be = backend::backend(self.device());
                           if (outs[0].numel() == 0) return;
                           be.copy(outs[0], self);
                           be.scatter_add(outs[0], d, index, src);
                         });
}

// ---- cat / stack ----------------------------------------------------------------

Tensor cat(const std::vector<Tensor>& tensors, int64_t dim) {
  SMELT_CHECK(!tensors.empty(), "cat: expected a non-empty list of Tensors");
  const Tensor* ref = nullptr;
  DType dt = tensors[0].dtype();
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    SMELT_CHECK(t.defined(), "cat: tensor number {} in the list is undefined", i);
    SMELT_CHECK(t.dim() > 0,
                "cat: zero-dimensional tensor (at position {}) cannot be concatenated; "
                "unsqueeze it first",
                i);
    SMELT_CHECK(t.device() == tensors[0].device(),
                "cat: expected all tensors to be on the same device, but tensor 0 is on {} and "
                "tensor {} on {}",
                tensors[0].device().str(), i, t.device().str());
    dt = promote_types(dt, t.dtype());
    bool skipped = t.dim() == 1 && t.sizes()[0] == 0;  // legacy: 1-D empty tensors are ignored
    if (!skipped && !ref) ref = &t;
  }
  if (!ref)
    return detail::run_op1("cat", tensors, {{"dim", int64_t{0}}}, {{0}, dt, tensors[0].device()},
                           [](const std::vector<Tensor>&) {});
  const int64_t nd = ref->dim();
  const int64_t d = wrap_dim(dim, nd, "cat");
  Shape out_shape = ref->sizes();
  out_shape[d] = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    if (t.dim() == 1 && t.sizes()[0] == 0) continue;
    SMELT_CHECK(t.dim() == nd,
                "cat: Tensors must have same number of dimensions: got {} and {} (shapes {} and "
                "{})",
                nd, t.dim(), shape_str(ref->sizes()), shape_str(t.sizes()));
    for (int64_t k = 0; k < nd; ++k)
      SMELT_CHECK(k == d || t.sizes()[k] == ref->sizes()[k],
                  "cat: Sizes of tensors must match except in dimension {}. Expected size {} but "
                  "got size {} for tensor number {} in the list.",
                  d, ref->sizes()[k], t.sizes()[k], i);
    out_shape[d] += t.sizes()[d];
  }
  return detail::run_op1("cat", tensors, {{"dim", d}}, {out_shape, dt, ref->device()},
                         [&](const std::vector<Tensor>& outs) {
                           std::vector<Tensor> parts;  // the inputs with elements along d
                           for (const Tensor& t : tensors)
                             if (!(t.dim() == 1 && t.sizes()[0] == 0) && t.sizes()[d] > 0)
                               parts.push_back(t);
                           backend::Backend& be = backend::backend(ref->device());
                           if (be.cat(outs[0], parts, d)) return;
                           int64_t offset = 0;
                           for (const Tensor& t : parts) {
                             be.copy(out_slice(outs[0], d, offset, t.sizes()[d]), t);
                             offset += t.sizes()[d];
                           }
                         });
}

Tensor stack(const std::vector<Tensor>& tensors, int64_t dim) {
  SMELT_CHECK(!tensors.empty(), "stack: stack expects a non-empty TensorList");
  const Shape& s0 = tensors[0].sizes();
  DType dt = tensors[0].dtype();
  for (size_t i = 0; i < tensors.size(); ++i) {
    SMELT_CHECK(tensors[i].defined(), "stack: tensor number {} in the list is undefined", i);
    SMELT_CHECK(tensors[i].sizes() == s0,
                "stack: stack expects each tensor to be equal size, but got {} at entry 0 and {} "
                "at entry {}",
                shape_str(s0), shape_str(tensors[i].sizes()), i);
    SMELT_CHECK(tensors[i].device() == tensors[0].device(),
                "stack: expected all tensors to be on the same device ({} vs {})",
                tensors[0].device().str(), tensors[i].device().str());
    dt = promote_types(dt, tensors[i].dtype());
  }
  const int64_t d = wrap_dim(dim, static_cast<int64_t>(s0.size()) + 1, "stack");
  Shape out_shape = s0;
  out_shape.insert(out_shape.begin() + d, static_cast<int64_t>(tensors.size()));
  return detail::run_op1("stack", tensors, {{"dim", d}}, {out_shape, dt, tensors[0].device()},
                         [&](const std::vector<Tensor>& outs) {
                           if (outs[0].numel() == 0) return;
                           backend::Backend& be = backend::backend(tensors[0].device());
                           for (size_t i = 0; i < tensors.size(); ++i)
                             be.copy(select(outs[0], d, static_cast<int64_t>(i)), tensors[i]);
                         });
}

// ---- pad / tril / triu --------------------------------------------------------------

Tensor pad(const Tensor& x, const std::vector<int64_t>& p, double value) {
  SMELT_CHECK(x.defined(), "pad: undefined input tensor");
  const int64_t nd = x.dim();
  SMELT_CHECK(p.size() % 2 == 0, "pad: Padding length must be divisible by 2 (got pad {})",
              shape_str(p));
  const int64_t npad = static_cast<int64_t>(p.size()) / 2;
  SMELT_CHECK(npad <= nd,
              "pad: Padding length should be less than or equal to two times the input "
              "dimension but got padding length {} and input of dimension {}",
              p.size(), nd);
  Shape out_shape = x.sizes();
  for (int64_t i = 0; i < npad; ++i) {
    int64_t k = nd - 1 - i;
    int64_t ns = x.sizes()[k] + p[2 * i] + p[2 * i + 1];
    SMELT_CHECK(ns >= 0,
                "pad: The input size {}, plus negative padding {} and {} resulted in a negative "
                "output size, which is invalid. Check dimension {} of your input (shape {}).",
                x.sizes()[k], p[2 * i], p[2 * i + 1], k, shape_str(x.sizes()));
    out_shape[k] = ns;
  }
  return detail::run_op1("pad", {x}, {{"pad", p}, {"value", value}},
                         {out_shape, x.dtype(), x.device()}, [&](const std::vector<Tensor>& outs) {
                           const Tensor& out = outs[0];
                           if (out.numel() == 0) return;
                           backend::Backend& be = backend::backend(x.device());
                           be.fill(out, value);
                           // Region of x that survives (negative pads crop) and where it lands.
                           Tensor src = x, dst = out;
                           for (int64_t i = 0; i < npad; ++i) {
                             int64_t k = nd - 1 - i, l = p[2 * i], r = p[2 * i + 1];
                             int64_t crop_l = std::max<int64_t>(-l, 0),
                                     crop_r = std::max<int64_t>(-r, 0);
                             int64_t len = x.sizes()[k] - crop_l - crop_r;
                             if (len <= 0) return;  // nothing of x remains
                             src = narrow(src, k, crop_l, len);
                             dst = narrow(dst, k, std::max<int64_t>(l, 0), len);
                           }
                           be.copy(dst, src);
                         });
}

namespace {
Tensor tri(const char* op, const Tensor& x, int64_t diagonal, bool lower) {
  SMELT_CHECK(x.defined(), "{}: undefined input tensor", op);
  SMELT_CHECK(x.dim() >= 2, "{}: input tensor must have at least 2 dimensions (got shape {})", op,
              shape_str(x.sizes()));
  return detail::run_op1(op, {x}, {{"diagonal", diagonal}}, {x.sizes(), x.dtype(), x.device()},
                         [&](const std::vector<Tensor>& outs) {
                           const Tensor& out = outs[0];
                           if (out.numel() == 0) return;
                           backend::Backend& be = backend::backend(x.device());
                           be.copy(out, x);
                           be.triangle_zero(out, diagonal, lower);
                         });
}
}  // namespace

Tensor tril(const Tensor& x, int64_t diagonal) { return tri("tril", x, diagonal, true); }
Tensor triu(const Tensor& x, int64_t diagonal) { return tri("triu", x, diagonal, false); }

// ---- masked_fill / index_put_ ---------------------------------------------------------

Tensor masked_fill(const Tensor& x, const Tensor& mask, const Scalar& value) {
  SMELT_CHECK(x.defined() && mask.defined(), "masked_fill: undefined tensor argument");
  SMELT_CHECK(mask.dtype() == DType::Bool,
              "masked_fill: expected a bool mask, got mask of dtype {}; use mask.to(smelt::bool_) "
              "or a comparison (x > 0)",
              dtype_name(mask.dtype()));
  SMELT_CHECK(mask.device() == x.device(), "masked_fill: mask on {} but input on {}",
              mask.device().str(), x.device().str());
  Shape out_shape = broadcast2(x.sizes(), mask.sizes(), "masked_fill");
  // The value in x's dtype, raising where PyTorch's Scalar::to<T> does (int8 and 200).
  const Scalar fill = detail::checked_number_to_dtype(value, x.dtype(), "masked_fill");
  return detail::run_op1(
      "masked_fill", {x, mask}, {{"value", fill}}, {out_shape, x.dtype(), x.device()},
      [&](const std::vector<Tensor>& outs) {
        // where(mask, value, x) computed in x's dtype.
        Tensor v = scalar_tensor(fill, TensorOptions(x.dtype()).device(x.device()));
        backend::backend(x.device()).pointwise("where", {}, x.dtype(), outs[0], {mask, v, x});
      });
}

Tensor& Tensor::index_put_(const Tensor& indices, const Tensor& values) const {
  SMELT_CHECK(defined() && indices.defined() && values.defined(),
              "index_put_: undefined tensor argument");
  const bool is_mask = indices.dtype() == DType::Bool;
  SMELT_CHECK(is_mask || indices.dtype() == DType::Int64 || indices.dtype() == DType::Int32,
              "index_put_: indices must be a bool mask or an int64/int32 index tensor, got dtype "
              "{}",
              dtype_name(indices.dtype()));
  SMELT_CHECK(is_mask || dim() > 0,
              "index_put_: cannot index a 0-dim tensor with an integer index");
  const Shape& self_sizes = sizes();
  // k leading dims of self are indexed; each selected "row" is self.sizes()[k:].
  const int64_t k = is_mask ? indices.dim() : 1;
  if (is_mask) {
    SMELT_CHECK(indices.dim() <= dim(),
                "index_put_: too many dimensions in the mask ({}) for a tensor of shape {}",
                indices.dim(), shape_str(self_sizes));
    for (int64_t i = 0; i < indices.dim(); ++i)
      SMELT_CHECK(indices.sizes()[i] == self_sizes[i],
                  "index_put_: The shape of the mask {} at index {} does not match the shape of "
                  "the indexed tensor {} at index {}",
                  shape_str(indices.sizes()), i, shape_str(self_sizes), i);
  }
  const Shape rest(self_sizes.begin() + k, self_sizes.end());
  const int64_t nrows = dims_product(self_sizes, 0, k);
  // Eager validation (indices are data): targets and the shape values broadcast to.
  std::vector<int64_t> rows;
  bool known = !indices.is_tracer();
  if (known) {
    if (is_mask) {
      if (indices.numel() > 0) {
        std::vector<bool> m = indices.to_vector<bool>();
        for (int64_t p = 0; p < nrows; ++p)
          if (m[p]) rows.push_back(p);
      }
    } else {
      // The rows themselves are needed here (not only checked): read on any device.
      if (indices.numel() > 0) rows = indices.to_vector<int64_t>();
      const int64_t size0 = self_sizes[0];
      for (auto& r : rows) {
        SMELT_CHECK(r >= -size0 && r < size0,
                    "index_put_: index {} is out of bounds for dimension 0 with size {}", r, size0);
        if (r < 0) r += size0;
      }
    }
    Shape target = is_mask ? Shape{static_cast<int64_t>(rows.size())} : indices.sizes();
    target.insert(target.end(), rest.begin(), rest.end());
    SMELT_CHECK(broadcastable_to(values.sizes(), target),
                "index_put_: shape mismatch: value tensor of shape {} cannot be broadcast to "
                "indexing result of shape {}",
                shape_str(values.sizes()), shape_str(target));
  }
  const Tensor self = *this;
  Tensor result = detail::run_op1(
      "index_put", {self, indices, values}, {{"accumulate", false}},
      {self_sizes, dtype(), device()}, [&](const std::vector<Tensor>& outs) {
        const Tensor& out = outs[0];
        backend::Backend& be = backend::backend(device());
        be.copy(out, self);
        const int64_t n = static_cast<int64_t>(rows.size());
        if (n == 0) return;
        Shape target{n};
        target.insert(target.end(), rest.begin(), rest.end());
        Tensor vals = detail::make_empty(target, dtype(), device());
        // values broadcast to [n, rest...]; an int index of shape S flattens to n rows.
        if (!is_mask && indices.dim() != 1) {
          Shape full = indices.sizes();
          full.insert(full.end(), rest.begin(), rest.end());
          Tensor vb = detail::make_empty(full, dtype(), device());
          be.copy(vb, values);
          be.copy(vals, make_view(vb, target, detail::contiguous_strides(target), 0));
        } else {
          be.copy(vals, values);
        }
        // out seen as [nrows, rest...]: the selected rows are its slices along dim 0.
        Shape flat{nrows};
        flat.insert(flat.end(), rest.begin(), rest.end());
        be.index_copy(make_view(out, flat, detail::contiguous_strides(flat), 0),
                      from_vector(rows, {n}, TensorOptions().device(device())), vals);
      });
  return copy_(result);
}

namespace detail {

void check_indices(const Tensor& index, int64_t size,
                   const std::function<std::string(int64_t)>& message) {
  if (index.is_tracer() || index.numel() == 0 || index.device().is_cuda()) return;
  // v is in [0, size) when uint64(v) < size: the largest of the values as
  // unsigned, in four independent maxima (4096 int64 indices: 2.0 -> 0.5 us;
  // embedding checks its ids with it before copying rows).
  auto in_range = [&](const auto* p, int64_t n) {
    auto u = [p](int64_t i) { return static_cast<uint64_t>(static_cast<int64_t>(p[i])); };
    uint64_t m0 = 0, m1 = 0, m2 = 0, m3 = 0;
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
      m0 = std::max(m0, u(i));
      m1 = std::max(m1, u(i + 1));
      m2 = std::max(m2, u(i + 2));
      m3 = std::max(m3, u(i + 3));
    }
    for (; i < n; ++i) m0 = std::max(m0, u(i));
    return std::max(std::max(m0, m1), std::max(m2, m3)) < static_cast<uint64_t>(size);
  };
  if (index.is_contiguous()) {
    const void* data = index.data_ptr();
    if (index.dtype() == DType::Int64 && in_range(static_cast<const int64_t*>(data), index.numel()))
      return;
    if (index.dtype() == DType::Int32 && in_range(static_cast<const int32_t*>(data), index.numel()))
      return;
  }
  for (int64_t v : index.to_vector<int64_t>())
    if (v < 0 || v >= size) throw_error(message(v));
}

}  // namespace detail

}  // namespace smelt
