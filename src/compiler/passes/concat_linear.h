// concat_linear: linear layers that read the same input become one GEMM over
// their concatenated weights (Inductor's concat_linear, which it applies only
// to frozen weights; TensorRT's horizontal GEMM fusion). A transformer's Q, K
// and V projections of one hidden state are the case it exists for: three
// GEMMs of N columns become one of 3N, which fills more of a GPU's SMs and
// launches once.
//
// A group is two or more `matmul(x, W_i.t())` nodes of one graph with
//   * the same left operand x (the same window of the same buffer), of rank
//     >= 2, and the same dtype;
//   * W_i a whole 2-D module parameter [N_i, K] read transposed ([K, N_i],
//     strides [1, K]), K equal for all;
//   * either each followed by linear's own bias add (attr gemm_bias, the
//     product's only reader) of a whole 1-D parameter [N_i], or none of them;
//   * results that the function does not return and no write-back reads, and
//     that every reader reads through a window that stays inside one
//     [.., N_i] column block (views, permutes, slices of the heads: anything
//     but a reshape across the last dim).
// The group becomes `matmul(x, Wcat.t())` (+ `add(.., bcat)` marked gemm_bias)
// where Wcat = cat(W_i, 0) [sum N_i, K] and bcat = cat(b_i) are constants
// computed at compile time, and each reader reads its block's columns of the
// fused result. Products and bias adds are the same float operations in the
// same order per element, so results are bit for bit those of the separate
// GEMMs wherever the GEMM library computes an element independently of N
// (cuBLASLt and oneDNN pick kernels by shape, so agreement is to rounding).
//
// The concatenated weights are copies: smelt::compile guards the version
// counter (Tensor::_version) of every parameter folded in, so an in-place
// update of one (an optimizer step, load_state_dict) recompiles rather than
// reading stale weights. Graphs that train (a joint forward + backward) are
// not rewritten; CompileOptions::concat_linear turns the pass off.
#pragma once
#include <vector>

#include "compiler/graph/graph.h"

namespace smelt::compiler {

struct ConcatLinearResult {
  int groups = 0;           // fused GEMMs made
  int gemms = 0;            // GEMMs they replace
  std::vector<int> params;  // indices (Buffer::input_index) of the parameters folded
  std::string str() const;  // "concat_linear: 6 group(s) of 18 GEMM(s) ..." for the graph log
};

/// Rewrites `g` as described above. `params` are the module's parameters and
/// buffers in Param-buffer order (Buffer::input_index), whose current values
/// are concatenated. Returns what it fused; `g` is unchanged when nothing was.
ConcatLinearResult concat_linear(Graph& g, const std::vector<Tensor>& params);

}  // namespace smelt::compiler
