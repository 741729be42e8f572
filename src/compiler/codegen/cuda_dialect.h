// The CUDA dialect: __global__ kernels taking each buffer as a parameter
// (16-byte aligned where the graph guarantees it, so that NVRTC turns
// consecutive accesses into vector loads and stores), ranges mapped onto the
// grid as the KernelConfig lays them out, 32- or 64-bit index arithmetic,
// atomicExch for the error flag, and a device prelude instead of the host's
// standard headers so that NVRTC compiles the embedded scalar-op headers.
//
// Layouts (KernelConfig):
//  * pointwise: one thread per `vec` consecutive elements (a Parallel range),
//    the vector's elements in an unrolled loop; with several vectors per
//    thread (KernelConfig::vectors_per_thread), a block covers that many
//    passes, its threads side by side in each;
//  * scans: one thread per row (Parallel), the row walked in order;
//  * reductions: rows over blocks, `rows_per_block` at a time (a Block range),
//    each row's elements over its `threads_per_row` threads (Thread ranges:
//    `vec` consecutive elements per step; a persistent row in `row_iters`
//    unrolled steps, its row buffers in registers), the threads' partials
//    combined by smelt::device::row_reduce (kernels/cuda_device.h) in
//    split_reduce; per-row results stored by the row's first thread.
#pragma once
#include "compiler/codegen/printer.h"

namespace smelt::compiler {

class CudaDialect : public Dialect {
 public:
  Target target() const override { return Target::Cuda; }
  std::string preamble() const override;
  void kernel_begin(const KernelDesc& k, CodeBuffer& out) const override;
  void range_begin(const Range& r, const KernelConfig& c, CodeBuffer& out) const override;
  void range_end(const Range& r, const KernelConfig& c, CodeBuffer& out) const override;
  std::string row_buffer(const std::string& type, const std::string& name, int64_t extent,
                         const KernelConfig& c) const override;
  std::string row_slot(const IndexExpr& index, const KernelConfig& c) const override;
  std::string element_index(const IndexExpr& index, const KernelConfig& c) const override;
  std::string once_per_row(const KernelConfig& c) const override;
  /// float16 / bfloat16 elements are their bits (uint16_t), see kernels/cuda_device.h.
  std::string storage_type(DType t) const override;
  std::string half_to_float(DType t, const std::string& v) const override;
  std::string float_to_half(DType t, const std::string& v) const override;
  /// bfloat16 stores of a vector loop (vec > 1) are staged: the hardware
  /// converts two floats per instruction (smelt::device::floats_to_bf16),
  /// and its inline assembly, which NVVM (CUDA 13) moves no load or store
  /// across, then sits after the vector's loads and before its stores, which
  /// stay mergeable into 16-byte accesses (checked on the PTX by
  /// CudaCodegen.BFloat16StoresConvertInHardwareAndStayVectors).
  std::string staged_store_lane(const Range& r, const KernelConfig& c, DType t) const override;
  std::string floats_to_half(DType t, const std::string& floats,
                             const std::string& bits) const override;
  /// A NaN among them: the hardware gives the canonical NaN, float_to_bf16
  /// keeps its sign and payload (smelt/half.h's bits, as eager stores them).
  std::string staged_store_redo(DType t, const std::string& floats) const override;
  std::string barrier() const override { return "__syncthreads();"; }
  void split_reduce(const Stmt& s, const std::string& acc_type, const std::string& loop,
                    const KernelConfig& c, CodeBuffer& out) const override;
  std::string set_error_flag(int code) const override;
};

}  // namespace smelt::compiler
