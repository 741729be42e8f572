// The partition of a joint forward + backward graph into a forward graph and a
// backward graph (AOTAutograd's partitioner; torch/_functorch/partitioners.py).
//
// smelt::compile traces a function whose results require grad together with
// the backward pass of those results (autograd::grad over tracers, with the
// results' gradients as graph inputs): one joint graph. The forward graph
// computes the results and the values the backward needs ("saved"); the
// backward graph reads the saved values and the results' gradients and
// computes the gradients of the inputs.
//
// Which values are saved: the forward nodes are those the results (and
// write-backs) need, the backward nodes the others the gradients need. Every
// forward value a backward node reads is either saved or recomputed in the
// backward graph from other saved values. A minimum cut decides, over the
// graph of forward values (each value's capacity: its bytes; a parameter's 0,
// the module keeps it alive anyway):
//   * the outputs of non-pointwise nodes (matmuls, reductions, movement ops)
//     and the arguments and parameters are never recomputed: they are saved
//     when the backward needs them (the inputs of a matmul, a reduction);
//   * the outputs of pointwise nodes may be recomputed (the node copied into
//     the backward graph, where it fuses into the backward kernels), from
//     saved values, when that saves bytes: a chain gelu(h) needed by the
//     backward of the next matmul is recomputed from h, which GELU's own
//     derivative saves anyway.
// Of the cuts of least bytes, the one nearest the backward is taken: a value
// is recomputed only when that saves memory (strictly). With recompute off,
// every forward value the backward reads is saved as it is.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "compiler/graph/graph.h"

namespace smelt::compiler {

/// How a joint graph's inputs and outputs are laid out.
struct JointSignature {
  /// Inputs [0, num_args): the function's arguments; [num_args, num_args +
  /// num_grad_outputs): the gradients of the results that require grad, in order.
  int num_args = 0;
  int num_grad_outputs = 0;
  /// Outputs [0, num_results): the function's results; the rest: gradients.
  int num_results = 0;
};

struct JointPartition {
  /// Inputs and parameters as in the joint graph (no gradient inputs);
  /// outputs: the results, then `num_saved` saved intermediates.
  Graph forward;
  /// Inputs: the arguments it reads ([0, num_args), as the forward's), the
  /// results' gradients ([num_args, num_args + K), as the joint graph's), the
  /// saved intermediates ([num_args + K, num_args + K + num_saved), forward
  /// outputs num_results + j); parameters: those it reads (as the forward's);
  /// outputs: the joint graph's gradient outputs, in order.
  Graph backward;
  int num_saved = 0;
  std::vector<int> saved_args;    // argument indices the backward reads
  std::vector<int> saved_params;  // parameter indices the backward reads
  int recomputed = 0;             // forward nodes copied into the backward graph
  /// Bytes the forward keeps for the backward (saved intermediates and
  /// arguments; parameters are the module's), with the partition's recompute
  /// rule and when saving every forward value the backward reads as it is.
  int64_t saved_bytes = 0;
  int64_t saved_bytes_all = 0;
  /// "saved 2 value(s), 1.0 MiB (without recompute: 3, 2.0 MiB); recomputed 1 node(s)"
  std::string str() const;
};

/// Splits `joint` (after the graph passes) as described above. `recompute`
/// false: nothing is recomputed. Raises GraphBreak when the backward reads an
/// argument, parameter or captured tensor that the forward writes in place
/// (its value at backward time would be the new one).
JointPartition partition_joint(const Graph& joint, const JointSignature& sig, bool recompute);

}  // namespace smelt::compiler
