// The autograd side of a compiled forward whose results require grad
// (AOTAutograd's CompiledFunction): each run of the forward graph gives its
// results that require grad one autograd node, CompiledFunctionBackward, whose
// apply() runs the compiled backward graph over the tensors the forward saved
// and the results' gradients. Its edges lead where eager's would: the
// AccumulateGrad of each leaf (module parameters, arguments and captured
// tensors that require grad; the engine accumulates into .grad and runs their
// hooks), or the history of an argument that has one. Saved tensors are
// autograd's SavedVariables: freed by a backward without retain_graph (a
// second backward raises PyTorch's error), each as soon as the last step of
// the backward graph that reads it ran (CompiledGraph::run_consuming), and
// checked against in-place writes.
// A result that is a view of an argument is not the graph's: it gets a view
// node of its own (connect_views), as eager's view ops record.
#pragma once
#include <memory>
#include <vector>

#include "compiler/runtime/executor.h"

namespace smelt::compiler {

/// How the node of one compiled forward runs its backward graph (fixed per
/// compiled graph; see compiler/passes/partition.h for the graphs' layout).
struct BackwardFunction {
  std::shared_ptr<CompiledGraph> graph;
  int num_args = 0;  // the forward's arguments (backward inputs [0, num_args))
  /// Results that require grad, in order: the gradient of result
  /// diff_results[k] is backward input num_args + k.
  std::vector<int> diff_results;
  /// Forward outputs num_results + j (the saved intermediates) are backward
  /// inputs num_args + diff_results.size() + j.
  int num_saved = 0;
  std::vector<int> saved_args;    // argument indices the backward reads
  std::vector<int> saved_params;  // parameter indices the backward reads
  /// The node's edges, in order: argument `arg`, or the real leaf `leaf`; the
  /// backward output holding its gradient (-1: none).
  struct Input {
    int arg = -1;
    Tensor leaf;
    int output = -1;
  };
  std::vector<Input> inputs;
};

/// A result that is a view of argument `arg` (a contiguous one that requires
/// grad): the forward graph returns that view of the argument itself.
struct ViewResult {
  int result = -1;
  int arg = -1;
};

/// Gives each result of `views` the history eager's view op would: a view node
/// (AsStridedBackward0, the result's window placed into a zero gradient of the
/// argument) onto the argument's gradient edge. A result that is the whole
/// argument is the argument itself (as `return x` is).
void connect_views(const std::vector<ViewResult>& views, const std::vector<Tensor>& args,
                   std::vector<Tensor>& outputs);

/// After a run of the forward graph: `outputs` holds the function's
/// `num_results` results, then the saved intermediates (dropped from it). The
/// results that require grad become outputs of one new CompiledFunctionBackward
/// node, which saves what `fn` says of `outputs`, `args` and `params`.
void connect_backward(const std::shared_ptr<const BackwardFunction>& fn,
                      const std::vector<Tensor>& args, const std::vector<Tensor>& params,
                      std::vector<Tensor>& outputs, int num_results);

}  // namespace smelt::compiler
