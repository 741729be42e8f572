// The CUDA dialect: __global__ kernels taking each buffer as a parameter,
// ranges mapped onto the grid (a grid-stride loop over blockIdx/threadIdx),
// 32- or 64-bit index arithmetic as the KernelConfig says, atomicExch for the
// error flag, and a device prelude instead of the host's standard headers so
// that NVRTC compiles the embedded scalar-op headers. Pointwise kernels print
// through it today; reductions (cross-lane warp/block combines) come with the
// GPU compiler.
#pragma once
#include "compiler/codegen/printer.h"

namespace smelt::compiler {

class CudaDialect : public Dialect {
 public:
  Target target() const override { return Target::Cuda; }
  std::string preamble() const override;
  void kernel_begin(const KernelDesc& k, CodeBuffer& out) const override;
  void range_begin(const Range& r, const KernelConfig& c, CodeBuffer& out) const override;
  std::string barrier() const override { return "__syncthreads();"; }
  void split_reduce(const Stmt& s, const std::string& acc_type, const std::string& loop,
                    CodeBuffer& out) const override;
  std::string set_error_flag(int code) const override;
};

}  // namespace smelt::compiler
