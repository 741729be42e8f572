// Reductions on CUDA (reduce.h): tensors -> ReduceArgs / ScanArgs.
#include "backend/cuda/reduce.h"

#include "backend/cuda/device.h"
#include "backend/cuda/kernels.h"
#include "core/tensor_impl.h"
#include "kernels/reduce_geom.h"

namespace smelt::cuda::impl {

namespace {

/// Scratch memory for the kernels' partials (kept until the call returns:
/// stream-ordered reuse makes that safe).
void* alloc_workspace(void* ctx, size_t bytes) {
  auto* held = static_cast<std::pair<int, std::vector<Tensor>>*>(ctx);
  held->second.push_back(detail::make_empty({static_cast<int64_t>(bytes)}, DType::UInt8,
                                            Device(DeviceType::CUDA, held->first), "reduction"));
  return held->second.back().data_ptr();
}

void copy_dims(const Shape& from, int64_t* to, const char* what) {
  SMELT_CHECK(static_cast<int>(from.size()) <= kMaxDims,
              "CUDA {}: {} dims after merging; at most {} are supported", what, from.size(),
              kMaxDims);
  for (size_t i = 0; i < from.size(); ++i) to[i] = from[i];
}

/// Fills the geometry of reducing `dims` of x (indexed reductions keep the
/// row-major order of the reduced dims, as the index is defined over it).
ReduceArgs make_args(ReduceKind kind, const Tensor& x, const std::vector<int64_t>& dims,
                     bool keep_order) {
  const reduce::ReduceGeom g = reduce::make_reduce_geom(x.sizes(), x.strides(), dims, keep_order);
  ReduceArgs a;
  a.kind = kind;
  a.x = static_cast<const char*>(x.data_ptr());
  a.x_dtype = x.dtype();
  a.n_out = g.n_out;
  a.n_red = g.n_red;
  a.out_ndim = static_cast<int>(g.out_sizes.size());
  copy_dims(g.out_sizes, a.out_sizes, "reduction");
  copy_dims(g.out_in_strides, a.out_in_strides, "reduction");
  copy_dims(g.out_out_strides, a.out_out_strides, "reduction");
  a.red_ndim = static_cast<int>(g.red_sizes.size());
  copy_dims(g.red_sizes, a.red_sizes, "reduction");
  copy_dims(g.red_strides, a.red_strides, "reduction");
  a.column = static_cast<int>(g.column);
  a.sm_count = properties(x.device().index).multiProcessorCount;
  a.stream = current_stream(x.device().index);
  return a;
}

void run(const ReduceArgs& a, int device, void (*launch)(const ReduceArgs&, const Workspace&)) {
  if (a.n_out == 0) return;
  DeviceGuard guard(device);
  std::pair<int, std::vector<Tensor>> held{device, {}};
  launch(a, Workspace{&alloc_workspace, &held});
}

}  // namespace

void reduce(backend::ReduceOp op, const Tensor& x, const std::vector<int64_t>& dims,
            const Tensor& out) {
  using R = backend::ReduceOp;
  ReduceKind kind = ReduceKind::Sum;
  switch (op) {
    case R::Sum:
      kind = ReduceKind::Sum;
      break;
    case R::Prod:
      kind = ReduceKind::Prod;
      break;
    case R::Mean:
      kind = ReduceKind::Mean;
      break;
    case R::Max:
      kind = ReduceKind::Max;
      break;
    case R::Min:
      kind = ReduceKind::Min;
      break;
    case R::Any:
      kind = ReduceKind::Any;
      break;
    case R::All:
      kind = ReduceKind::All;
      break;
  }
  ReduceArgs a = make_args(kind, x, dims, false);
  a.out = static_cast<char*>(out.data_ptr());
  a.out_dtype = out.dtype();
  const bool sumlike =
      kind == ReduceKind::Sum || kind == ReduceKind::Prod || kind == ReduceKind::Mean;
  const bool minmax = kind == ReduceKind::Max || kind == ReduceKind::Min;
  run(a, x.device().index,
      sumlike  ? &launch_reduce_sum
      : minmax ? &launch_reduce_minmax
               : &launch_reduce_other);
}

void arg_reduce(const Tensor& x, const std::vector<int64_t>& dims, const Tensor& values,
                const Tensor& indices, bool is_max) {
  ReduceArgs a = make_args(is_max ? ReduceKind::ArgMax : ReduceKind::ArgMin, x, dims, true);
  a.out = values.defined() ? static_cast<char*>(values.data_ptr()) : nullptr;
  a.out_dtype = x.dtype();
  a.out2 = static_cast<char*>(indices.data_ptr());
  run(a, x.device().index, &launch_reduce_minmax);
}

void var(const Tensor& x, const std::vector<int64_t>& dims, double correction, bool take_sqrt,
         const Tensor& var, const Tensor& mean) {
  ReduceArgs a = make_args(ReduceKind::Var, x, dims, false);
  a.out = static_cast<char*>(var.data_ptr());
  a.out_dtype = var.dtype();
  a.out2 = mean.defined() ? static_cast<char*>(mean.data_ptr()) : nullptr;
  a.out2_dtype = var.dtype();
  a.correction = correction;
  a.take_sqrt = take_sqrt;
  run(a, x.device().index, &launch_reduce_other);
}

void cumsum(const Tensor& x, int64_t dim, const Tensor& out) {
  if (x.numel() == 0) return;
  ScanArgs a;
  a.x = static_cast<const char*>(x.data_ptr());
  a.x_dtype = x.dtype();
  a.out = static_cast<char*>(out.data_ptr());
  a.out_dtype = out.dtype();
  const Shape ostr = detail::contiguous_strides(x.sizes());
  if (x.dim() == 0) {
    a.len = 1;
    a.lines = 1;
  } else {
    a.len = x.sizes()[static_cast<size_t>(dim)];
    a.x_stride = x.strides()[static_cast<size_t>(dim)];
    a.out_stride = ostr[static_cast<size_t>(dim)];
    a.lines = x.numel() / a.len;
    for (int64_t d = 0; d < x.dim(); ++d) {
      if (d == dim) continue;
      SMELT_CHECK(a.other_ndim < kMaxDims, "CUDA cumsum: at most {} dims are supported", kMaxDims);
      a.other_sizes[a.other_ndim] = x.sizes()[static_cast<size_t>(d)];
      a.other_x_strides[a.other_ndim] = x.strides()[static_cast<size_t>(d)];
      a.other_out_strides[a.other_ndim] = ostr[static_cast<size_t>(d)];
      ++a.other_ndim;
    }
  }
  DeviceGuard guard(x.device().index);
  a.stream = current_stream(x.device().index);
  launch_cumsum(a);
}

}  // namespace smelt::cuda::impl
