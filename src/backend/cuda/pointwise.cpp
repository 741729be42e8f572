// The CUDA pointwise kernel table by functor name (pointwise.h).
#include "backend/cuda/pointwise.h"

#include <unordered_map>

namespace smelt::cuda::impl::pw {

const PointwiseKernel* find_pointwise(const std::string& functor) {
  static const std::unordered_map<std::string, PointwiseKernel> table = [] {
    std::unordered_map<std::string, PointwiseKernel> t;
    for (auto* list : {unary_float_kernels, unary_other_kernels, binary_arith_kernels,
                       binary_compare_kernels, ternary_kernels})
      for (auto& [name, k] : list()) t.emplace(name, k);
    return t;
  }();
  auto it = table.find(functor);
  return it == table.end() ? nullptr : &it->second;
}

}  // namespace smelt::cuda::impl::pw
