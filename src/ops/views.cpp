// View ops: each builds a TensorImpl over the same storage with
// detail::make_view (never run_op), so views work unchanged while tracing and
// writes through a view are seen by its base. Under autograd each records its
// backward node through detail::record_view (derivative in the op table). Semantics follow PyTorch
// (aten/src/ATen/native/TensorShape.cpp; computeStride from
// aten/src/ATen/TensorUtils.cpp).
#include <algorithm>
#include <optional>

#include "core/tensor_impl.h"
#include "ops/dispatch.h"
#include "smelt/ops.h"

namespace smelt {

using detail::make_view;
using detail::shape_str;
using detail::wrap_dim;

namespace {

/// Resolves one -1 in `shape` against `numel` (PyTorch's infer_size).
Shape infer_size(const char* op, const Shape& shape, int64_t numel) {
  Shape res = shape;
  int64_t newsize = 1;
  std::optional<size_t> infer_dim;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == -1) {
      SMELT_CHECK(!infer_dim, "{}: only one dimension can be inferred (shape {})", op,
                  shape_str(shape));
      infer_dim = d;
    } else {
      SMELT_CHECK(shape[d] >= 0, "{}: invalid shape dimension {} in shape {}", op, shape[d],
                  shape_str(shape));
      newsize *= shape[d];
    }
  }
  if (infer_dim) {
    SMELT_CHECK(newsize != 0,
                "{}: cannot reshape tensor of {} elements into shape {} because the unspecified "
                "dimension size -1 can be any value and is ambiguous",
                op, numel, shape_str(shape));
    SMELT_CHECK(numel % newsize == 0, "{}: shape '{}' is invalid for input of size {}", op,
                shape_str(shape), numel);
    res[*infer_dim] = numel / newsize;
  } else {
    SMELT_CHECK(numel == newsize, "{}: shape '{}' is invalid for input of size {}", op,
                shape_str(shape), numel);
  }
  return res;
}

/// PyTorch's computeStride: strides that let `newshape` view memory laid out as
/// (oldshape, oldstride), or nullopt when no such strides exist.
std::optional<Shape> compute_stride(const Shape& oldshape, const Shape& oldstride,
                                    const Shape& newshape) {
  if (oldshape.empty()) return Shape(newshape.size(), 1);
  const int64_t numel = detail::shape_numel(oldshape);
  if (numel == 0 && oldshape == newshape) return oldstride;
  Shape newstride(newshape.size());
  if (numel == 0) {
    for (int64_t d = static_cast<int64_t>(newshape.size()) - 1; d >= 0; --d) {
      if (d == static_cast<int64_t>(newshape.size()) - 1) {
        newstride[d] = 1;
      } else {
        newstride[d] = std::max<int64_t>(newshape[d + 1], 1) * newstride[d + 1];
      }
    }
    return newstride;
  }
  int64_t view_d = static_cast<int64_t>(newshape.size()) - 1;
  int64_t chunk_base_stride = oldstride.back();
  int64_t tensor_numel = 1, view_numel = 1;
  for (int64_t tensor_d = static_cast<int64_t>(oldshape.size()) - 1; tensor_d >= 0; --tensor_d) {
    tensor_numel *= oldshape[tensor_d];
    if (tensor_d == 0 || (oldshape[tensor_d - 1] != 1 &&
                          oldstride[tensor_d - 1] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || newshape[view_d] == 1)) {
        newstride[view_d] = view_numel * chunk_base_stride;
        view_numel *= newshape[view_d];
        --view_d;
      }
      if (view_numel != tensor_numel) return std::nullopt;
      if (tensor_d > 0) {
        chunk_base_stride = oldstride[tensor_d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  if (view_d != -1) return std::nullopt;
  return newstride;
}

void check_defined(const Tensor& x, const char* op) {
  SMELT_CHECK(x.defined(), "{}: the input tensor is undefined", op);
}

/// The attrs of a view whose derivative needs only the input's shape.
detail::Attrs no_attrs() { return {}; }

}  // namespace

Tensor view(const Tensor& x, const Shape& shape) {
  check_defined(x, "view");
  Shape sizes = infer_size("view", shape, x.numel());
  auto strides = compute_stride(x.sizes(), x.strides(), sizes);
  SMELT_CHECK(strides.has_value(),
              "view: view size is not compatible with input tensor's size and stride (at least "
              "one dimension spans across two contiguous subspaces): input shape {} strides {}, "
              "requested shape {}. Use .reshape(...) instead.",
              shape_str(x.sizes()), shape_str(x.strides()), shape_str(shape));
  return detail::record_view(
      "view", x, make_view(x, std::move(sizes), std::move(*strides), x.storage_offset()), no_attrs);
}

Tensor reshape(const Tensor& x, const Shape& shape) {
  check_defined(x, "reshape");
  Shape sizes = infer_size("reshape", shape, x.numel());
  if (auto strides = compute_stride(x.sizes(), x.strides(), sizes))
    return detail::record_view(
        "reshape", x, make_view(x, std::move(sizes), std::move(*strides), x.storage_offset()),
        no_attrs);
  Tensor c = x.contiguous();
  return detail::record_view(
      "reshape", c, make_view(c, sizes, detail::contiguous_strides(sizes), c.storage_offset()),
      no_attrs);
}

Tensor permute(const Tensor& x, const std::vector<int64_t>& dims) {
  check_defined(x, "permute");
  const int64_t nd = x.dim();
  SMELT_CHECK(static_cast<int64_t>(dims.size()) == nd,
              "permute: number of dimensions in the tensor input does not match the length of "
              "the desired ordering of dimensions i.e. input.dim() = {} is not equal to "
              "len(dims) = {} (shape {}, dims {})",
              nd, dims.size(), shape_str(x.sizes()), shape_str(dims));
  Shape sizes(nd), strides(nd);
  std::vector<bool> seen(nd, false);
  for (int64_t i = 0; i < nd; ++i) {
    int64_t d = wrap_dim(dims[i], nd, "permute");
    SMELT_CHECK(!seen[d], "permute: repeated dim {} in dims {}", d, shape_str(dims));
    seen[d] = true;
    sizes[i] = x.sizes()[d];
    strides[i] = x.strides()[d];
  }
  return detail::record_view(
      "permute", x, make_view(x, std::move(sizes), std::move(strides), x.storage_offset()), [&] {
        std::vector<int64_t> wrapped(nd);
        for (int64_t i = 0; i < nd; ++i) wrapped[i] = wrap_dim(dims[i], nd, "permute");
        return detail::Attrs{{"dims", wrapped}};
      });
}

Tensor transpose(const Tensor& x, int64_t dim0, int64_t dim1) {
  check_defined(x, "transpose");
  const int64_t nd = x.dim();
  int64_t a = wrap_dim(dim0, nd, "transpose"), b = wrap_dim(dim1, nd, "transpose");
  Shape sizes = x.sizes(), strides = x.strides();
  if (nd > 0) {
    std::swap(sizes[a], sizes[b]);
    std::swap(strides[a], strides[b]);
  }
  return detail::record_view(
      "transpose", x, make_view(x, std::move(sizes), std::move(strides), x.storage_offset()), [&] {
        return detail::Attrs{{"dim0", a}, {"dim1", b}};
      });
}

Tensor t(const Tensor& x) {
  check_defined(x, "t");
  SMELT_CHECK(x.dim() <= 2,
              "t: t() expects a tensor with <= 2 dimensions, but self is {}D (shape {}); use "
              "transpose(dim0, dim1) or permute",
              x.dim(), shape_str(x.sizes()));
  if (x.dim() == 2) return transpose(x, 0, 1);
  return detail::record_view("t", x, make_view(x, x.sizes(), x.strides(), x.storage_offset()),
                             no_attrs);
}

Tensor squeeze(const Tensor& x, std::optional<std::vector<int64_t>> dim) {
  check_defined(x, "squeeze");
  const int64_t nd = x.dim();
  std::vector<bool> drop(nd, false);
  if (!dim) {
    for (int64_t d = 0; d < nd; ++d) drop[d] = x.sizes()[d] == 1;
  } else {
    for (int64_t d : *dim) {
      int64_t w = wrap_dim(d, nd, "squeeze");
      if (nd > 0 && x.sizes()[w] == 1) drop[w] = true;
    }
  }
  Shape sizes, strides;
  for (int64_t d = 0; d < nd; ++d) {
    if (drop[d]) continue;
    sizes.push_back(x.sizes()[d]);
    strides.push_back(x.strides()[d]);
  }
  return detail::record_view("squeeze", x,
                             make_view(x, std::move(sizes), std::move(strides), x.storage_offset()),
                             no_attrs);
}

Tensor unsqueeze(const Tensor& x, int64_t dim) {
  check_defined(x, "unsqueeze");
  const int64_t nd = x.dim();
  int64_t d = wrap_dim(dim, nd + 1, "unsqueeze");
  Shape sizes = x.sizes(), strides = x.strides();
  int64_t st = d >= nd ? 1 : sizes[d] * strides[d];
  sizes.insert(sizes.begin() + d, 1);
  strides.insert(strides.begin() + d, st);
  return detail::record_view("unsqueeze", x,
                             make_view(x, std::move(sizes), std::move(strides), x.storage_offset()),
                             no_attrs);
}

Tensor expand(const Tensor& x, const Shape& size) {
  check_defined(x, "expand");
  const int64_t nd = x.dim(), nn = static_cast<int64_t>(size.size());
  SMELT_CHECK(nn >= nd,
              "expand: the number of sizes provided ({}) must be greater or equal to the number "
              "of dimensions in the tensor ({}) (tensor shape {}, sizes {})",
              nn, nd, shape_str(x.sizes()), shape_str(size));
  Shape sizes(nn), strides(nn);
  for (int64_t i = nn - 1; i >= 0; --i) {
    int64_t off = nd - nn + i;  // matching dim of x, or < 0 for a new leading dim
    int64_t want = size[i];
    if (off < 0) {
      SMELT_CHECK(want >= 0,
                  "expand: the expanded size of the tensor ({}) isn't allowed in a leading, "
                  "non-existing dimension {} (target sizes {}, tensor sizes {})",
                  want, i, shape_str(size), shape_str(x.sizes()));
      sizes[i] = want;
      strides[i] = 0;
      continue;
    }
    int64_t have = x.sizes()[off];
    if (want == -1) want = have;
    SMELT_CHECK(want >= 0, "expand: invalid size {} at dim {} (target sizes {})", want, i,
                shape_str(size));
    if (have == want) {
      sizes[i] = have;
      strides[i] = x.strides()[off];
    } else {
      SMELT_CHECK(have == 1,
                  "expand: The expanded size of the tensor ({}) must match the existing size "
                  "({}) at non-singleton dimension {}.  Target sizes: {}.  Tensor sizes: {}",
                  want, have, i, shape_str(size), shape_str(x.sizes()));
      sizes[i] = want;
      strides[i] = 0;
    }
  }
  return detail::record_view("expand", x,
                             make_view(x, std::move(sizes), std::move(strides), x.storage_offset()),
                             no_attrs);
}

Tensor broadcast_to(const Tensor& x, const Shape& size) { return expand(x, size); }

Tensor flatten(const Tensor& x, int64_t start_dim, int64_t end_dim) {
  check_defined(x, "flatten");
  const int64_t nd = x.dim();
  int64_t s = wrap_dim(start_dim, nd, "flatten"), e = wrap_dim(end_dim, nd, "flatten");
  SMELT_CHECK(s <= e,
              "flatten: flatten() has invalid args: start_dim ({}) cannot come after end_dim "
              "({})",
              start_dim, end_dim);
  if (nd == 0) return reshape(x, {1});
  if (s == e)
    return detail::record_view("flatten", x,
                               make_view(x, x.sizes(), x.strides(), x.storage_offset()), no_attrs);
  Shape shape(x.sizes().begin(), x.sizes().begin() + s);
  int64_t n = 1;
  for (int64_t d = s; d <= e; ++d) n *= x.sizes()[d];
  shape.push_back(n);
  shape.insert(shape.end(), x.sizes().begin() + e + 1, x.sizes().end());
  return reshape(x, shape);
}

Tensor unflatten(const Tensor& x, int64_t dim, const Shape& sizes) {
  check_defined(x, "unflatten");
  SMELT_CHECK(x.dim() > 0, "unflatten: cannot unflatten a 0-dim tensor");
  int64_t d = wrap_dim(dim, x.dim(), "unflatten");
  SMELT_CHECK(!sizes.empty(), "unflatten: sizes must be non-empty");
  Shape inner;
  try {
    inner = infer_size("unflatten", sizes, x.sizes()[d]);
  } catch (const Error&) {
    SMELT_CHECK(false,
                "unflatten: provided sizes {} don't multiply up to the size of dim {} ({}) in "
                "the input tensor of shape {}",
                shape_str(sizes), dim, x.sizes()[d], shape_str(x.sizes()));
  }
  Shape shape(x.sizes().begin(), x.sizes().begin() + d);
  shape.insert(shape.end(), inner.begin(), inner.end());
  shape.insert(shape.end(), x.sizes().begin() + d + 1, x.sizes().end());
  return view(x, shape);  // splitting one dim is always a view
}

Tensor narrow(const Tensor& x, int64_t dim, int64_t start, int64_t length) {
  check_defined(x, "narrow");
  SMELT_CHECK(x.dim() > 0, "narrow: narrow() cannot be applied to a 0-dim tensor");
  SMELT_CHECK(length >= 0, "narrow: narrow(): length must be non-negative, got {}", length);
  int64_t d = wrap_dim(dim, x.dim(), "narrow");
  const int64_t size = x.sizes()[d];
  SMELT_CHECK(start >= -size && start <= size,
              "narrow: start out of range (expected to be in range of [{}, {}], but got {})", -size,
              size, start);
  if (start < 0) start += size;
  SMELT_CHECK(start <= size - length,
              "narrow: start ({}) + length ({}) exceeds dimension size ({}) of dim {} (shape {})",
              start, length, size, d, shape_str(x.sizes()));
  Shape sizes = x.sizes();
  sizes[d] = length;
  return detail::record_view(
      "narrow", x,
      make_view(x, std::move(sizes), x.strides(), x.storage_offset() + start * x.strides()[d]),
      [&] {
        return detail::Attrs{{"dim", d}, {"start", start}};
      });
}

Tensor slice(const Tensor& x, int64_t dim, std::optional<int64_t> start_opt,
             std::optional<int64_t> end_opt, int64_t step) {
  check_defined(x, "slice");
  SMELT_CHECK(x.dim() > 0, "slice: slice() cannot be applied to a 0-dim tensor");
  SMELT_CHECK(step > 0, "slice: slice step must be positive, got {}", step);
  int64_t d = wrap_dim(dim, x.dim(), "slice");
  const int64_t size = x.sizes()[d];
  int64_t start = start_opt.value_or(0), end = end_opt.value_or(size);
  if (start < 0) start += size;
  if (end < 0) end += size;
  start = std::clamp<int64_t>(start, 0, size);
  end = std::clamp<int64_t>(end, start, size);
  Shape sizes = x.sizes(), strides = x.strides();
  sizes[d] = (end - start + step - 1) / step;
  strides[d] *= step;
  return detail::record_view("slice", x,
                             make_view(x, std::move(sizes), std::move(strides),
                                       x.storage_offset() + start * x.strides()[d]),
                             [&] {
                               return detail::Attrs{{"dim", d}, {"start", start}, {"step", step}};
                             });
}

Tensor select(const Tensor& x, int64_t dim, int64_t index) {
  check_defined(x, "select");
  SMELT_CHECK(x.dim() > 0, "select: select() cannot be applied to a 0-dim tensor");
  int64_t d = wrap_dim(dim, x.dim(), "select");
  const int64_t size = x.sizes()[d];
  SMELT_CHECK(index >= -size && index < size,
              "select: index {} out of range for tensor of size {} at dimension {}", index,
              shape_str(x.sizes()), d);
  if (index < 0) index += size;
  Shape sizes = x.sizes(), strides = x.strides();
  sizes.erase(sizes.begin() + d);
  strides.erase(strides.begin() + d);
  return detail::record_view("select", x,
                             make_view(x, std::move(sizes), std::move(strides),
                                       x.storage_offset() + index * x.strides()[d]),
                             [&] {
                               return detail::Attrs{{"dim", d}, {"index", index}};
                             });
}

std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim) {
  check_defined(x, "split");
  SMELT_CHECK(x.dim() > 0, "split: split expects at least a 1-dimensional tensor");
  SMELT_CHECK(split_size >= 0, "split: split expects split_size be non-negative, but got {}",
              split_size);
  int64_t d = wrap_dim(dim, x.dim(), "split");
  const int64_t size = x.sizes()[d];
  SMELT_CHECK(split_size > 0 || size == 0,
              "split: split_size can only be 0 if dimension size is 0, but got dimension size "
              "of {}",
              size);
  int64_t n = split_size == 0 ? 1 : std::max<int64_t>((size + split_size - 1) / split_size, 1);
  std::vector<Tensor> out;
  out.reserve(n);
  for (int64_t i = 0; i < n; ++i) {
    int64_t start = i * split_size;
    out.push_back(narrow(x, d, start, std::min(split_size, size - start)));
  }
  return out;
}

std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& split_sizes, int64_t dim) {
  check_defined(x, "split");
  SMELT_CHECK(x.dim() > 0, "split: split expects at least a 1-dimensional tensor");
  int64_t d = wrap_dim(dim, x.dim(), "split");
  const int64_t size = x.sizes()[d];
  int64_t total = 0;
  for (auto s : split_sizes) {
    SMELT_CHECK(s >= 0,
                "split: split_with_sizes expects split_sizes have only non-negative entries, "
                "but got split_sizes={}",
                shape_str(split_sizes));
    total += s;
  }
  SMELT_CHECK(total == size,
              "split: split_with_sizes expects split_sizes to sum exactly to {} (input tensor's "
              "size at dimension {}), but got split_sizes={}",
              size, d, shape_str(split_sizes));
  std::vector<Tensor> out;
  out.reserve(split_sizes.size());
  int64_t start = 0;
  for (auto s : split_sizes) {
    out.push_back(narrow(x, d, start, s));
    start += s;
  }
  return out;
}

std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim) {
  check_defined(x, "chunk");
  SMELT_CHECK(x.dim() > 0, "chunk: chunk expects at least a 1-dimensional tensor");
  SMELT_CHECK(chunks > 0, "chunk: chunk expects `chunks` to be greater than 0, got: {}", chunks);
  int64_t d = wrap_dim(dim, x.dim(), "chunk");
  const int64_t size = x.sizes()[d];
  const int64_t split_size = (size + chunks - 1) / chunks;
  // A zero-size dim still yields `chunks` empty pieces, as PyTorch.
  if (split_size == 0 && size == 0) return split(x, std::vector<int64_t>(chunks, 0), d);
  return split(x, split_size, d);
}

}  // namespace smelt
