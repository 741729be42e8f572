// The eager CPU pointwise kernels by functor name, behind Backend::pointwise:
// the kernel record, and the tables the kernel sources (pointwise_unary.cpp,
// pointwise_binary.cpp, built once per CPU capability, see capability.h)
// provide through dispatch stubs.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "backend/cpu/capability.h"
#include "core/tensor_impl.h"
#include "kernels/pointwise_list.h"
#include "smelt/scalar.h"

namespace smelt::cpu::pw {

// Compute-type sets an op supports (kernels/pointwise_list.h).
using ::smelt::pw::kAll;
using ::smelt::pw::kB;
using ::smelt::pw::kF;
using ::smelt::pw::kI;
using ::smelt::pw::kIB;
using ::smelt::pw::kIF;

/// True when dtype `t`'s category is in Set.
inline bool in_set(int set, DType t) {
  int cat = t == DType::Bool ? kB : is_floating(t) ? kF : kI;
  return (set & cat) != 0;
}

/// One eager pointwise kernel: out = scalar::<functor><C>(C(inputs)..., C(extra)...)
/// for every compute type C of its set (see Backend::pointwise).
struct PointwiseKernel {
  int arity = 0;
  int n_extra = 0;
  int set = 0;  // compute-type categories it is instantiated for (kB | kI | kF)
  void (*run)(DType compute, const Tensor& out, const std::vector<Tensor>& inputs,
              const std::vector<Scalar>& extra) = nullptr;
};

/// Registration lists of the kernel sources: functor name -> kernel.
using PointwiseTable = std::vector<std::pair<const char*, PointwiseKernel>>;

/// The kernel of `functor` for the current CPU capability, or nullptr when there is none.
const PointwiseKernel* find_pointwise(const std::string& functor);

}  // namespace smelt::cpu::pw

namespace smelt::cpu {
using PointwiseTableFn = pw::PointwiseTable (*)();
/// The unary (pointwise_unary.cpp) and binary/ternary (pointwise_binary.cpp) kernels.
SMELT_DECLARE_DISPATCH(PointwiseTableFn, unary_pointwise_stub);
SMELT_DECLARE_DISPATCH(PointwiseTableFn, binary_pointwise_stub);
}  // namespace smelt::cpu
