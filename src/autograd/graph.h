// The backward graph's pieces (PyTorch's torch/csrc/autograd): tensors saved
// for backward with their version, the node kinds (an op's node built from its
// op-table derivative, AccumulateGrad for leaves, CopySlices and the view node
// for in-place writes through views) and the functions that connect tensors
// to nodes (gradient edges, history). Nodes are owned by shared_ptr with
// delete_node as deleter, which frees a chain of nodes iteratively.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "core/tensor_impl.h"
#include "ops/op_table.h"
#include "smelt/autograd.h"

namespace smelt::autograd {

/// Deleter of every node: frees the nodes a dying node releases one after the
/// other instead of recursively (a graph as deep as a long training loop would
/// overflow the stack).
void delete_node(Node* n);

/// The sequence_nr() the next node made in this thread gets: nodes made
/// before a moment have smaller numbers than this at that moment.
uint64_t next_sequence_nr();

template <class T, class... Args>
std::shared_ptr<T> make_node(Args&&... args) {
  return std::shared_ptr<T>(new T(std::forward<Args>(args)...), delete_node);
}

/// True while a node's apply() runs in a backward pass that keeps the graph
/// (retain_graph / create_graph): its saved tensors are needed again. False
/// otherwise, where a node may free what it saved as soon as it used it (the
/// engine releases it after apply() anyway). PyTorch's
/// torch._C._autograd._get_current_graph_task_keep_graph.
bool current_graph_task_keep_graph();

/// A tensor saved for backward, with the version of its memory at the time.
class SavedVariable {
 public:
  SavedVariable() = default;
  /// `is_output`: `t` is an output of `owner` (kept without its history, which
  /// would point back at `owner`: a cycle; unpack restores it while `owner` lives).
  SavedVariable(const Tensor& t, bool is_output, const std::shared_ptr<Node>& owner);
  /// The saved tensor; Error if it was freed (a second backward without
  /// retain_graph) or modified in place since it was saved. `node` names the
  /// node in the error.
  Tensor unpack(const Node& node) const;
  /// Frees the tensor (release_variables).
  void reset();
  /// Before `dst` is overwritten in place by the result of the node that saved
  /// this (x.mul_(y) is x.copy_(mul(x, y))): a saved `dst` is replaced by a copy of
  /// its current values, PyTorch's "original self" of an in-place op.
  void preserve_before_write(const Tensor& dst);

 private:
  Tensor data_;
  uint32_t version_ = 0;
  bool saved_ = false;      // a defined tensor was saved
  bool released_ = false;   // freed by release_variables
  bool is_output_ = false;  // data_ is an alias of an output of the owner
  std::weak_ptr<Node> owner_;
  uint32_t output_nr_ = 0;
  /// After preserve_before_write: the history the copy stands in for.
  Edge preserved_edge_;
};

/// The node of one recorded op: its op-table derivative over the saved tensors.
class OpNode : public Node {
 public:
  OpNode(const detail::OpDef& def, detail::Attrs attrs, std::vector<detail::OutMeta> input_meta);
  std::string name() const override;
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override;
  void release_variables() override;
  /// Saves input i / output i (called right after the node is connected).
  void save(const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs);
  const detail::OpDef& def() const { return def_; }
  /// See SavedVariable::preserve_before_write.
  void preserve_before_write(const Tensor& dst);

 private:
  const detail::OpDef& def_;
  detail::Attrs attrs_;
  std::vector<detail::OutMeta> input_meta_;
  std::vector<SavedVariable> saved_inputs_, saved_outputs_;
  std::vector<bool> has_saved_input_, has_saved_output_;
};

/// Accumulates the gradient of a leaf into its .grad (and runs its hooks first).
class AccumulateGrad : public Node {
 public:
  explicit AccumulateGrad(std::shared_ptr<TensorImpl> leaf);
  std::string name() const override { return "AccumulateGrad"; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override;
  void call_tensor_pre_hooks(std::vector<Tensor>& grads) override;
  const std::shared_ptr<TensorImpl>& leaf() const { return leaf_; }

 private:
  std::shared_ptr<TensorImpl> leaf_;
};

/// Where a view lies in its base's memory: sizes, strides and the offset from the
/// base's first element (the base is contiguous).
struct ViewGeometry {
  Shape sizes, strides;
  int64_t offset = 0;
  /// The view of `t` (base-shaped and contiguous) at this geometry.
  Tensor apply(const Tensor& t) const;
};
/// The geometry of view `v` in `base`; Error when the base is not contiguous.
ViewGeometry view_geometry(const Tensor& v, const Tensor& base);

/// The base after an in-place write into one of its views (PyTorch's CopySlices):
/// gradient to the base's previous history everywhere but the written region, and
/// the region's gradient to the written source.
class CopySlices : public Node {
 public:
  CopySlices(ViewGeometry view, InputMetadata src);
  std::string name() const override { return "CopySlices"; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override;

 private:
  ViewGeometry view_;
  InputMetadata src_;
};

/// A view whose history is its base's (after the base was written in place):
/// the view's gradient placed into a zero base (PyTorch's AsStridedBackward0).
class ViewOfBase : public Node {
 public:
  explicit ViewOfBase(ViewGeometry view, InputMetadata base);
  std::string name() const override { return "AsStridedBackward0"; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override;

 private:
  ViewGeometry view_;
  InputMetadata base_;
};

/// A differentiable op with no derivative: backward through it raises.
class NotImplementedNode : public Node {
 public:
  explicit NotImplementedNode(std::string op) : op_(std::move(op)) {}
  std::string name() const override { return "NotImplemented"; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override;

 private:
  std::string op_;
};

// ---- tensors and the graph ------------------------------------------------------------------

/// The autograd state of `t`, made on first use.
detail::AutogradMeta& autograd_meta(const Tensor& t);
/// Shape, dtype and device of `t` as a gradient's metadata.
InputMetadata metadata_of(const Tensor& t);
/// The edge a gradient of `t` flows into: (grad_fn, output_nr), the leaf's
/// AccumulateGrad, or an invalid edge for a tensor that does not require grad. A
/// view whose history is stale (its memory was written in place since) gets a
/// ViewOfBase node onto its base's current history first.
Edge gradient_edge(const Tensor& t);
/// The leaf's AccumulateGrad node (one per leaf while a graph holds it).
std::shared_ptr<Node> grad_accumulator(const Tensor& t);
/// Makes `t` output `output_nr` of `fn`.
void set_history(const Tensor& t, const std::shared_ptr<Node>& fn, uint32_t output_nr);
/// "[float32 [2, 3]]"
std::string tensor_desc(const Tensor& t);

/// Installs the recorder of ops (record.cpp); called wherever a tensor can start
/// to require grad, so that no op runs with such a tensor before it is installed.
void ensure_recorder();

}  // namespace smelt::autograd
