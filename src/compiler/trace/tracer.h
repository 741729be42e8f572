// The tracer: a TraceContext that turns op calls on tracer tensors into graph
// nodes. Tracer tensors are ordinary TensorImpls whose Storage carries a
// TracedBuffer instead of data, so views (which only make new TensorImpls over
// the same storage) need no nodes, and an in-place write rebinds the storage
// to the buffer holding the new contents (functionalization): every later read
// through any alias sees the write, exactly as eager. A write into a real
// tensor the function captured or made (a parameter an optimizer updates, its
// state) lifts that tensor the same way: its final value is written back.
//
// Training steps: ops over tensors that require grad record their backward
// nodes as in eager mode, so a backward() the function runs is traced too
// (the derivative formulas are smelt ops). The .grad of every leaf the
// function touches is tracked (note_grad): the .grad it leaves becomes a
// result of the graph that each call assigns, the .grad it read on entry a
// guard; host state an optimizer reads is guarded by closures it registers.
#pragma once
#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "compiler/graph/graph.h"

namespace smelt::compiler {

struct TracedBuffer : detail::TraceValue {
  explicit TracedBuffer(int b) : buf(b) {}
  int buf;
};

class GraphBuilder : public detail::TraceContext {
 public:
  /// `trace_serial`: storages older than this are captured constants (0: now).
  explicit GraphBuilder(uint64_t trace_serial = 0);
  ~GraphBuilder() override;  // restores parameter storages
  GraphBuilder(const GraphBuilder&) = delete;
  GraphBuilder& operator=(const GraphBuilder&) = delete;

  /// A tracer standing for argument `index` (same sizes, strides, dtype; its
  /// buffer's base pointer is the argument's data_ptr()). An argument that
  /// requires grad is a leaf of the trace, also when it has a history (a
  /// grad_fn): the backward of a compiled forward connects to that history at
  /// run time, and a backward() the function runs itself raises GraphBreak
  /// (note_backward) since it would stop at the argument.
  Tensor add_input(const Tensor& arg, int index);
  /// A contiguous input of `meta`, with no data at trace time (the gradient of
  /// a result, in a joint trace; the caller passes a contiguous tensor whose
  /// data is 16-byte aligned).
  Tensor add_input(const detail::OutMeta& meta, int index);
  /// Puts a module parameter/buffer's storage into tracing (restored by
  /// restore_params() or the destructor). Tensors sharing a storage share a buffer.
  void add_param(const Tensor& param, int index);
  /// The function takes `n` arguments: inputs the trace adds itself (the .grad
  /// values it reads) are numbered from `n` on.
  void set_num_args(int n) { next_input_ = std::max(next_input_, n); }
  void restore_params();

  /// A tracer viewing buffer `buf` (used to replay graphs in passes).
  Tensor view_of(int buf, const Shape& sizes, const Shape& strides, int64_t offset);
  Tensor view_of(const Operand& o);
  /// The operand a tensor is read as: a tracer's window, an inline scalar for a
  /// wrapped number, or a constant buffer for any other real tensor.
  Operand operand_of(const Tensor& t);

  /// Records the function's results and the write-backs of mutated inputs.
  void finish(const std::vector<Tensor>& outputs);

  // TraceContext
  std::vector<Tensor> record(const std::string& op, const std::vector<Tensor>& inputs,
                             const detail::Attrs& attrs,
                             const std::vector<detail::OutMeta>& outs) override;
  void record_copy(const Tensor& dst, const Tensor& src) override;
  void record_assign(const Tensor& dst, const Tensor& src) override;
  void record_random(const std::string& op) override;
  /// A real tensor older than the trace (captured by the function) is lifted:
  /// ops over it are recorded, not evaluated once at trace time.
  bool captures(const std::vector<Tensor>& inputs) const override;
  void note_grad(const Tensor& leaf, bool write) override;
  void note_backward() override;
  long own_storage_refs(const Tensor& t) const override;
  void add_guard(std::function<std::string()> check) override;
  void on_abort(std::function<void()> undo) override;

  /// The .grad of a leaf the function read or replaced.
  struct GradSlot {
    std::shared_ptr<TensorImpl> leaf;  // a real tensor, or the tracer of argument `arg`
    int arg = -1;
    Tensor entry;          // its .grad when the function first touched it (the call's entry)
    bool guarded = false;  // read before being replaced: the entry .grad is a guard
    /// A defined entry .grad that the function read is a graph input (index
    /// `input`, after the arguments), bound at each call to the leaf's .grad of
    /// the moment; `traced` is its tracer.
    int input = -1;
    Tensor traced;
  };
  /// What a call of the graph does to the .grad of grad_slots[slot]: it becomes
  /// graph output `output` (-1: undefined).
  struct GradEffect {
    int slot = -1;
    int output = -1;
  };
  /// Puts every .grad the function touched back as it was on entry (the graph's
  /// runs set them; called once the trace is over, whether it succeeded or not).
  void restore_grads();
  /// Runs the undo actions of on_abort, latest first (the graph is not used).
  void abort();
  /// The undo actions of on_abort (to run latest first), handed over when the
  /// trace succeeded: a later stage may still fail.
  std::vector<std::function<void()>> take_undo() { return std::move(undo_); }

  Graph graph;
  std::vector<GradSlot> grad_slots;
  std::vector<GradEffect> grad_effects;  // filled by finish()
  std::vector<std::function<std::string()>> host_guards;
  bool ran_backward = false;
  /// The backward pass being traced is the joint trace's own (trace_backward),
  /// not one the function runs.
  bool tracing_joint_backward = false;
  /// autograd::next_sequence_nr() when the builder was made: autograd nodes
  /// with smaller numbers were recorded before the trace.
  uint64_t first_node() const { return first_node_; }
  /// The argument (index) whose tracer is `leaf`, or -1.
  int arg_of_leaf(const TensorImpl* leaf) const;
  /// The function's own results: the first graph outputs (the .grad values follow).
  int num_results = 0;

 private:
  std::shared_ptr<Storage> storage_for(int buf);
  /// A new Input buffer `index` and a tracer over it.
  Tensor input_tracer(const Shape& sizes, const Shape& strides, DType dtype, Device device,
                      int index, bool aligned);
  int current_buffer(const Tensor& tracer) const;
  /// Makes real tensor `t`'s storage a tracer bound to its constant buffer, which
  /// is then written back at the end of the run (an in-place write into state).
  void lift(const Tensor& t);
  /// `t` outlives the trace: a real tensor (its storage possibly bound into
  /// the trace), not a tracer the trace made.
  bool is_real(const Tensor& t) const;

  std::vector<std::shared_ptr<Storage>> storages_;  // by buffer id (tracer storages)
  std::map<const Storage*, int> constants_;         // real storage -> constant buffer
  // Inputs and params: (original buffer, the storage whose binding may change).
  std::vector<std::pair<int, std::shared_ptr<Storage>>> bound_;
  std::vector<std::shared_ptr<Storage>> swapped_params_;
  std::map<const TensorImpl*, int> input_leaves_;  // tracer of an argument -> its index
  std::vector<int> history_args_;                  // arguments that require grad with a grad_fn
  std::map<const TensorImpl*, size_t> slot_of_;    // leaf -> its index in grad_slots
  int next_input_ = 0;                             // the input index add_input gives next
  uint64_t first_node_ = 0;
  std::vector<std::function<void()>> undo_;
};

/// Installs a trace context for the current scope.
class TraceScope {
 public:
  explicit TraceScope(detail::TraceContext* ctx) : prev_(detail::set_trace_context(ctx)) {}
  ~TraceScope() { detail::set_trace_context(prev_); }
  TraceScope(const TraceScope&) = delete;
  TraceScope& operator=(const TraceScope&) = delete;

 private:
  detail::TraceContext* prev_;
};

}  // namespace smelt::compiler
