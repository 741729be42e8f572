// Reduction ops: sum, mean, prod, amax, amin, max/min (with and without dim),
// argmax, argmin, var, std, var_mean, logsumexp, any, all, cumsum.
//
// Each op validates its arguments, computes the output shape and dtype
// (PyTorch's rules) and records through detail::run_op with attrs
//   dim      std::vector<int64_t>: the reduced dims, non-negative, sorted; every
//            dim when reducing over everything (argmax/argmin with dim=nullopt:
//            all dims plus flatten=true); cumsum: {dim} ({} for a 0-dim input)
//   keepdim  bool
//   dtype    DType: the result dtype; reductions accumulate in
//            reduce::accumulate_t (detail::accumulation): for sum, mean and
//            prod acc_type of it (float for float16/bfloat16/float32, double
//            for float64, int64 for integers); var/std/var_mean in double
//   correction (double) for var / std / var_mean
// std is its own node "std" (sqrt of the Welford variance), not sqrt(var(...)).
// max(x) / min(x) over all elements record "amax" / "amin" over every dim.
// logsumexp is ordinary tensor code over primitive ops (amax, isinf, where,
// sub, exp, sum, log, add, squeeze), so the compiler only sees primitives.
// The eager kernels are the backend's (backend/cpu/reduce.cpp on the CPU), the accumulators in
// kernels/reduce_ops.h.
#include <algorithm>

#include "backend/backend.h"
#include "ops/dispatch.h"
#include "smelt/ops.h"

namespace smelt {

namespace {

using detail::Attrs;
using detail::OutMeta;

/// Normalized, sorted reduced dims; empty `dim` means every dim.
std::vector<int64_t> reduce_dims(const char* op, const Tensor& x, const std::vector<int64_t>& dim) {
  const int64_t nd = x.dim();
  std::vector<int64_t> dims;
  if (dim.empty()) {
    for (int64_t d = 0; d < nd; ++d) dims.push_back(d);
    return dims;
  }
  for (int64_t d : dim) {
    int64_t w = detail::wrap_dim(d, nd, op);
    SMELT_CHECK(std::find(dims.begin(), dims.end(), w) == dims.end(),
                "{}: dim {} appears multiple times in the list of dims [{}]; list each dim once",
                op, w, fmt::join(dim, ", "));
    dims.push_back(w);
  }
  if (nd == 0) dims.clear();  // a 0-dim tensor has no dim to reduce (dim 0 / -1 allowed)
  std::sort(dims.begin(), dims.end());
  return dims;
}

std::vector<int64_t> all_dims(const Tensor& x) {
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < x.dim(); ++d) dims.push_back(d);
  return dims;
}

Shape reduced_shape(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  Shape s;
  for (int64_t d = 0; d < x.dim(); ++d) {
    bool red = std::binary_search(dims.begin(), dims.end(), d);
    if (!red) {
      s.push_back(x.sizes()[static_cast<size_t>(d)]);
    } else if (keepdim) {
      s.push_back(1);
    }
  }
  return s;
}

/// max-like reductions have no identity: every reduced dim must be non-empty.
void check_nonempty(const char* op, const Tensor& x, const std::vector<int64_t>& dims, bool all) {
  if (all) {
    SMELT_CHECK(x.numel() != 0,
                "{}: expected reduction dim to be specified for input.numel() == 0 (input shape "
                "{}); an empty tensor has no {}: pass a dim whose size is not zero",
                op, detail::shape_str(x.sizes()), op);
  }
  for (int64_t d : dims) {
    SMELT_CHECK(x.sizes()[static_cast<size_t>(d)] != 0,
                "{}: expected reduction dim {} to have non-zero size (input shape {}); an empty "
                "dim has no {}",
                op, d, detail::shape_str(x.sizes()), op);
  }
}

/// Default result dtype of sum / prod / cumsum: integers and bool -> int64.
DType sum_dtype(const Tensor& x, std::optional<DType> dtype) {
  if (dtype) return *dtype;
  return is_integral(x.dtype(), true) ? DType::Int64 : x.dtype();
}

/// x converted to `dt` for a kernel computing in `dt`; no copy when the kernel
/// accumulates x's elements exactly already (same dtype, or integer -> int64).
/// The compiler mirrors this (compiler/lower/loop_ir.cpp, reduction_info): a
/// compiled row visits its elements in the copy's order where eager copies.
Tensor kernel_input(const Tensor& x, DType dt) {
  if (x.dtype() == dt || (is_integral(x.dtype(), true) && dt == DType::Int64)) return x;
  Tensor c = detail::make_empty(x.sizes(), dt, x.device());
  backend::backend(x.device()).copy(c, x);
  return c;
}

Tensor sum_like(const char* op, const Tensor& x, const std::vector<int64_t>& dims, bool keepdim,
                std::optional<DType> dtype, bool is_prod) {
  const DType out_dt = sum_dtype(x, dtype);
  Attrs attrs{{"dim", dims}, {"keepdim", keepdim}, {"dtype", out_dt}};
  return detail::run_op1(op, {x}, attrs, {reduced_shape(x, dims, keepdim), out_dt, x.device()},
                         [&](const std::vector<Tensor>& out) {
                           backend::backend(x.device())
                               .reduce(is_prod ? backend::ReduceOp::Prod : backend::ReduceOp::Sum,
                                       kernel_input(x, out_dt), dims, out[0]);
                         });
}

Tensor minmax(const char* op, const char* record_as, const Tensor& x,
              const std::vector<int64_t>& dims, bool keepdim, bool all, bool is_max) {
  check_nonempty(op, x, dims, all);
  Attrs attrs{{"dim", dims}, {"keepdim", keepdim}, {"dtype", x.dtype()}};
  return detail::run_op1(
      record_as, {x}, attrs, {reduced_shape(x, dims, keepdim), x.dtype(), x.device()},
      [&](const std::vector<Tensor>& out) {
        backend::backend(x.device())
            .reduce(is_max ? backend::ReduceOp::Max : backend::ReduceOp::Min, x, dims, out[0]);
      });
}

std::tuple<Tensor, Tensor> max_min_dim(const char* op, const Tensor& x, int64_t dim, bool keepdim,
                                       bool is_max) {
  std::vector<int64_t> dims = reduce_dims(op, x, {dim});
  check_nonempty(op, x, dims, false);
  Shape s = reduced_shape(x, dims, keepdim);
  Attrs attrs{{"dim", dims}, {"keepdim", keepdim}, {"dtype", x.dtype()}};
  auto outs =
      detail::run_op(op, {x}, attrs, {{s, x.dtype(), x.device()}, {s, DType::Int64, x.device()}},
                     [&](const std::vector<Tensor>& out) {
                       backend::backend(x.device()).arg_reduce(x, dims, out[0], out[1], is_max);
                     });
  return {outs[0], outs[1]};
}

Tensor arg(const char* op, const Tensor& x, std::optional<int64_t> dim, bool keepdim, bool is_max) {
  SMELT_CHECK(x.dtype() != DType::Bool,
              "{}: not implemented for dtype bool (as in PyTorch); convert the input first, e.g. "
              "x.to(smelt::int64)",
              op);
  Attrs attrs;
  std::vector<int64_t> dims;
  Shape s;
  if (dim) {
    dims = reduce_dims(op, x, {*dim});
    check_nonempty(op, x, dims, false);
    s = reduced_shape(x, dims, keepdim);
  } else {
    SMELT_CHECK(x.numel() != 0,
                "{}: expected reduction dim to be specified for input.numel() == 0 (input shape "
                "{}); pass a dim whose size is not zero",
                op, detail::shape_str(x.sizes()));
    dims = all_dims(x);
    s = keepdim ? Shape(static_cast<size_t>(x.dim()), 1) : Shape{};
    attrs.set("flatten", true);
  }
  attrs.set("dim", dims);
  attrs.set("keepdim", keepdim);
  attrs.set("dtype", DType::Int64);
  return detail::run_op1(
      op, {x}, attrs, {s, DType::Int64, x.device()}, [&](const std::vector<Tensor>& out) {
        backend::backend(x.device()).arg_reduce(x, dims, Tensor(), out[0], is_max);
      });
}

void check_var_dtype(const char* op, const Tensor& x) {
  SMELT_CHECK(is_floating(x.dtype()),
              "{}: only floating point inputs are supported (got dtype {}); convert the input "
              "first, e.g. x.to(smelt::float32)",
              op, dtype_name(x.dtype()));
}

Tensor var_or_std(const char* op, const Tensor& x, const std::vector<int64_t>& dim,
                  double correction, bool keepdim, bool take_sqrt) {
  check_var_dtype(op, x);
  std::vector<int64_t> dims = reduce_dims(op, x, dim);
  Attrs attrs{
      {"dim", dims}, {"keepdim", keepdim}, {"dtype", x.dtype()}, {"correction", correction}};
  return detail::run_op1(
      op, {x}, attrs, {reduced_shape(x, dims, keepdim), x.dtype(), x.device()},
      [&](const std::vector<Tensor>& out) {
        backend::backend(x.device()).var(x, dims, correction, take_sqrt, out[0], Tensor());
      });
}

Tensor any_all(const char* op, const Tensor& x, const std::vector<int64_t>& dim, bool keepdim,
               bool is_any) {
  std::vector<int64_t> dims = reduce_dims(op, x, dim);
  const DType out_dt = x.dtype() == DType::UInt8 ? DType::UInt8 : DType::Bool;
  Attrs attrs{{"dim", dims}, {"keepdim", keepdim}, {"dtype", out_dt}};
  return detail::run_op1(op, {x}, attrs, {reduced_shape(x, dims, keepdim), out_dt, x.device()},
                         [&](const std::vector<Tensor>& out) {
                           backend::backend(x.device())
                               .reduce(is_any ? backend::ReduceOp::Any : backend::ReduceOp::All, x,
                                       dims, out[0]);
                         });
}

/// logsumexp over `dims` (resolved from the user's `dim`), written over amax, exp and sum.
Tensor logsumexp_impl(const Tensor& x, const std::vector<int64_t>& dim,
                      const std::vector<int64_t>& dims, bool keepdim);

}  // namespace

Tensor sum(const Tensor& x, const std::vector<int64_t>& dim, bool keepdim,
           std::optional<DType> dtype) {
  return sum_like("sum", x, reduce_dims("sum", x, dim), keepdim, dtype, false);
}

Tensor prod(const Tensor& x, std::optional<int64_t> dim, bool keepdim, std::optional<DType> dtype) {
  std::vector<int64_t> dims = dim ? reduce_dims("prod", x, {*dim}) : all_dims(x);
  return sum_like("prod", x, dims, keepdim, dtype, true);
}

Tensor mean(const Tensor& x, const std::vector<int64_t>& dim, bool keepdim,
            std::optional<DType> dtype) {
  if (dtype) {
    SMELT_CHECK(is_floating(*dtype),
                "mean: could not infer output dtype: dtype must be a floating point dtype (got "
                "{}); pass e.g. smelt::float32",
                dtype_name(*dtype));
  } else {
    SMELT_CHECK(is_floating(x.dtype()),
                "mean: could not infer output dtype: input dtype must be floating point (got {}); "
                "pass dtype=smelt::float32 or convert the input with x.to(smelt::float32)",
                dtype_name(x.dtype()));
  }
  std::vector<int64_t> dims = reduce_dims("mean", x, dim);
  const DType out_dt = dtype ? *dtype : x.dtype();
  Attrs attrs{{"dim", dims}, {"keepdim", keepdim}, {"dtype", out_dt}};
  return detail::run_op1("mean", {x}, attrs, {reduced_shape(x, dims, keepdim), out_dt, x.device()},
                         [&](const std::vector<Tensor>& out) {
                           backend::backend(x.device())
                               .reduce(backend::ReduceOp::Mean, kernel_input(x, out_dt), dims,
                                       out[0]);
                         });
}

Tensor amax(const Tensor& x, const std::vector<int64_t>& dim, bool keepdim) {
  std::vector<int64_t> dims = reduce_dims("amax", x, dim);
  return minmax("amax", "amax", x, dims, keepdim, dim.empty(), true);
}

Tensor amin(const Tensor& x, const std::vector<int64_t>& dim, bool keepdim) {
  std::vector<int64_t> dims = reduce_dims("amin", x, dim);
  return minmax("amin", "amin", x, dims, keepdim, dim.empty(), false);
}

std::tuple<Tensor, Tensor> max(const Tensor& x, int64_t dim, bool keepdim) {
  return max_min_dim("max", x, dim, keepdim, true);
}

std::tuple<Tensor, Tensor> min(const Tensor& x, int64_t dim, bool keepdim) {
  return max_min_dim("min", x, dim, keepdim, false);
}

Tensor max(const Tensor& x) { return minmax("max", "amax", x, all_dims(x), false, true, true); }

Tensor min(const Tensor& x) { return minmax("min", "amin", x, all_dims(x), false, true, false); }

Tensor argmax(const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  return arg("argmax", x, dim, keepdim, true);
}

Tensor argmin(const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  return arg("argmin", x, dim, keepdim, false);
}

Tensor var(const Tensor& x, const std::vector<int64_t>& dim, double correction, bool keepdim) {
  return var_or_std("var", x, dim, correction, keepdim, false);
}

Tensor std(const Tensor& x, const std::vector<int64_t>& dim, double correction, bool keepdim) {
  return var_or_std("std", x, dim, correction, keepdim, true);
}

std::tuple<Tensor, Tensor> var_mean(const Tensor& x, const std::vector<int64_t>& dim,
                                    double correction, bool keepdim) {
  check_var_dtype("var_mean", x);
  std::vector<int64_t> dims = reduce_dims("var_mean", x, dim);
  Shape s = reduced_shape(x, dims, keepdim);
  Attrs attrs{
      {"dim", dims}, {"keepdim", keepdim}, {"dtype", x.dtype()}, {"correction", correction}};
  auto outs = detail::run_op(
      "var_mean", {x}, attrs, {{s, x.dtype(), x.device()}, {s, x.dtype(), x.device()}},
      [&](const std::vector<Tensor>& out) {
        backend::backend(x.device()).var(x, dims, correction, false, out[0], out[1]);
      });
  return {outs[0], outs[1]};
}

Tensor logsumexp(const Tensor& x, const std::vector<int64_t>& dim, bool keepdim) {
  std::vector<int64_t> dims = reduce_dims("logsumexp", x, dim);
  // One autograd node of its own (the ops below run with grad mode off then).
  return detail::run_differentiable(
      "logsumexp", {x}, Attrs{{"dim", dims}, {"keepdim", keepdim}},
      [&] { return std::vector<Tensor>{logsumexp_impl(x, dim, dims, keepdim)}; })[0];
}

namespace {
Tensor logsumexp_impl(const Tensor& x, const std::vector<int64_t>& dim,
                      const std::vector<int64_t>& dims, bool keepdim) {
  Tensor xf = is_floating(x.dtype()) ? x : to_dtype(x, DType::Float32);
  if (xf.numel() == 0) {
    // No maximum to subtract; reducing an empty dim gives log(0) = -inf.
    SMELT_CHECK(!dim.empty(),
                "logsumexp: cannot reduce over all dims of an empty tensor (shape {}); pass the "
                "dims to reduce",
                detail::shape_str(x.sizes()));
    return log(sum(exp(xf), dims, keepdim));
  }
  // max subtracted first; an infinite max (all -inf, or some +inf) is replaced
  // by 0 so that -inf - -inf and inf - inf do not make NaN.
  Tensor m = amax(xf, dims, true);
  m = where(isinf(m), Scalar(0.0), m);
  Tensor s = sum(exp(sub(xf, m)), dims, keepdim);
  Tensor mk = (keepdim || dims.empty()) ? m : squeeze(m, dims);
  return add(log(s), mk);
}
}  // namespace

Tensor any(const Tensor& x, const std::vector<int64_t>& dim, bool keepdim) {
  return any_all("any", x, dim, keepdim, true);
}

Tensor all(const Tensor& x, const std::vector<int64_t>& dim, bool keepdim) {
  return any_all("all", x, dim, keepdim, false);
}

Tensor cumsum(const Tensor& x, int64_t dim, std::optional<DType> dtype) {
  const int64_t d = detail::wrap_dim(dim, x.dim(), "cumsum");
  const DType out_dt = sum_dtype(x, dtype);
  std::vector<int64_t> dims;
  if (x.dim() > 0) dims.push_back(d);
  Attrs attrs{{"dim", dims}, {"dtype", out_dt}};
  return detail::run_op1("cumsum", {x}, attrs, {x.sizes(), out_dt, x.device()},
                         [&](const std::vector<Tensor>& out) {
                           backend::backend(x.device()).cumsum(kernel_input(x, out_dt), d, out[0]);
                         });
}

}  // namespace smelt
