// The backward half of a joint trace (AOTAutograd's joint graph): after a
// function's forward has been traced and some of its results require grad
// (and the function ran no backward pass itself), the backward pass of those
// results is traced into the same graph. The results' gradients are new
// graph inputs (symbolic grad_outputs, numbered after the arguments); the
// backward runs autograd::grad over the tracers, through each op's op-table
// derivative, as a training step's backward() is traced; the gradients of
// every tensor the results depend on through autograd (the arguments that
// require grad, module parameters, leaves the function captures) become graph
// outputs after the results. compiler/passes/partition.h then splits the
// graph into a forward and a backward graph.
#pragma once
#include <vector>

#include "compiler/trace/tracer.h"

namespace smelt::compiler {

/// What trace_backward added to the graph.
struct TracedBackward {
  /// The results that require grad, in order: the gradient of results[
  /// diff_results[k]] is graph input num_args + k.
  std::vector<int> diff_results;
  /// A tensor whose gradient the backward computes: argument `arg`, or (arg
  /// -1) a real leaf (a parameter, a tensor the function captures); `output`:
  /// the graph output holding its gradient (-1: it gets none).
  struct Input {
    int arg = -1;
    Tensor leaf;
    int output = -1;
  };
  std::vector<Input> inputs;
};

/// Traces the backward of `results` (the traced function's results, some of
/// which require grad) into `gb` and records the graph's outputs (finish()):
/// the results, then the defined gradients in the order of `inputs`. Leaves'
/// hooks are not run while tracing (the leaves' AccumulateGrad runs them on
/// the real gradients at backward time). Raises GraphBreak when the function
/// touched a .grad, when a result depends on a tensor the function captures
/// that has a history of its own (recorded before the call), or when a
/// derivative raises (an op without one).
/// `skip`: results not to differentiate (views of arguments, which get a view
/// node of their own at run time); empty: none.
TracedBackward trace_backward(GraphBuilder& gb, const std::vector<Tensor>& results, int num_args,
                              const std::vector<bool>& skip = {});

}  // namespace smelt::compiler
