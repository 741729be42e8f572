// The tracer: a TraceContext that turns op calls on tracer tensors into graph
// nodes. Tracer tensors are ordinary TensorImpls whose Storage carries a
// TracedBuffer instead of data, so views (which only make new TensorImpls over
// the same storage) need no nodes, and an in-place write rebinds the storage
// to the buffer holding the new contents (functionalization): every later read
// through any alias sees the write, exactly as eager.
#pragma once
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

/// Whether argument `arg`'s data pointer is 16-byte aligned, as far as code
/// generation cares: on CUDA the generated kernels use vector accesses on
/// aligned buffers (Buffer::aligned) and smelt::compile guards it; elsewhere
/// it is always true (CPU kernels do not depend on it, so no recompile).
bool input_aligned(const Tensor& arg);

class GraphBuilder : public detail::TraceContext {
 public:
  /// `trace_serial`: storages older than this are captured constants (0: now).
  explicit GraphBuilder(uint64_t trace_serial = 0);
  ~GraphBuilder() override;  // restores parameter storages
  GraphBuilder(const GraphBuilder&) = delete;
  GraphBuilder& operator=(const GraphBuilder&) = delete;

  /// A tracer standing for argument `index` (same sizes, strides, dtype; its
  /// buffer's base pointer is the argument's data_ptr()).
  Tensor add_input(const Tensor& arg, int index);
  /// Puts a module parameter/buffer's storage into tracing (restored by
  /// restore_params() or the destructor). Tensors sharing a storage share a buffer.
  void add_param(const Tensor& param, int index);
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
  void record_random(const std::string& op) override;
  /// A real tensor older than the trace (captured by the function) is lifted:
  /// ops over it are recorded, not evaluated once at trace time.
  bool captures(const std::vector<Tensor>& inputs) const override;

  Graph graph;

 private:
  std::shared_ptr<Storage> storage_for(int buf);
  int current_buffer(const Tensor& tracer) const;

  std::vector<std::shared_ptr<Storage>> storages_;  // by buffer id (tracer storages)
  std::map<const Storage*, int> constants_;         // real storage -> constant buffer
  // Inputs and params: (original buffer, the storage whose binding may change).
  std::vector<std::pair<int, std::shared_ptr<Storage>>> bound_;
  std::vector<std::shared_ptr<Storage>> swapped_params_;
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
