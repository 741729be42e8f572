// The table of the CUDA backend's eager pointwise kernels by functor name (the
// functors of kernels/pointwise_list.h), as host code sees it: the kernels are
// instantiated in pointwise_*.cu (pointwise.cuh), one file per list.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "backend/cuda/kernel_args.h"
#include "kernels/pointwise_list.h"

namespace smelt::cuda::impl::pw {

/// One eager pointwise kernel (see Backend::pointwise).
struct PointwiseKernel {
  int arity = 0;
  int n_extra = 0;
  int set = 0;  // compute-type categories (smelt::pw::kB | kI | kF)
  void (*run)(const PointwiseArgs& args) = nullptr;
};
using PointwiseTable = std::vector<std::pair<const char*, PointwiseKernel>>;

PointwiseTable unary_float_kernels();     // pointwise_unary_float.cu
PointwiseTable unary_other_kernels();     // pointwise_unary_other.cu
PointwiseTable binary_arith_kernels();    // pointwise_binary_arith.cu
PointwiseTable binary_compare_kernels();  // pointwise_binary_compare.cu
PointwiseTable ternary_kernels();         // pointwise_ternary.cu

/// The kernel of `functor`, or nullptr when there is none.
const PointwiseKernel* find_pointwise(const std::string& functor);

/// True when compute dtype `t`'s category is in `set`.
inline bool in_set(int set, DType t) {
  const int cat = t == DType::Bool ? smelt::pw::kB : is_floating(t) ? smelt::pw::kF : smelt::pw::kI;
  return (set & cat) != 0;
}

}  // namespace smelt::cuda::impl::pw
