#include "compiler/trace/tracer.h"

#include <fmt/format.h>

#include <algorithm>

#include "autograd/graph.h"
#include "core/tensor_impl.h"
#include "ops/op_call.h"
#include "smelt/autograd.h"

namespace smelt::compiler {

GraphBuilder::GraphBuilder(uint64_t trace_serial) : first_node_(autograd::next_sequence_nr()) {
  graph.trace_serial = trace_serial ? trace_serial : Storage::next_serial();
}

GraphBuilder::~GraphBuilder() { restore_params(); }

void GraphBuilder::restore_params() {
  for (auto& s : swapped_params_) s->set_trace(nullptr);
  swapped_params_.clear();
}

std::shared_ptr<Storage> GraphBuilder::storage_for(int buf) {
  if (storages_.size() <= static_cast<size_t>(buf)) storages_.resize(buf + 1);
  auto& s = storages_[buf];
  if (!s) {
    const Buffer& b = graph.buffers[buf];
    s = Storage::tracer(b.extent * itemsize(b.dtype), b.device,
                        std::make_shared<TracedBuffer>(buf));
  }
  return s;
}

int GraphBuilder::current_buffer(const Tensor& t) const {
  auto* v = dynamic_cast<TracedBuffer*>(t.storage()->trace().get());
  SMELT_INTERNAL_ASSERT(v != nullptr, "tracer storage without a traced buffer");
  return v->buf;
}

Tensor GraphBuilder::view_of(int buf, const Shape& sizes, const Shape& strides, int64_t offset) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = storage_for(buf);
  impl->sizes = sizes;
  impl->strides = strides;
  impl->offset = offset;
  impl->dtype = graph.buffers[buf].dtype;
  impl->device = graph.buffers[buf].device;
  return Tensor(std::move(impl));
}

Tensor GraphBuilder::view_of(const Operand& o) {
  if (o.is_scalar()) return detail::wrapped_scalar(*o.scalar);
  return view_of(o.buf, o.sizes, o.strides, o.offset);
}

namespace {
/// Whether the base of `t`'s storage (what a parameter's or constant's buffer
/// points at) is 16-byte aligned on CUDA: allocator blocks are; memory
/// wrapped from elsewhere may not be.
bool storage_aligned(const Tensor& t) {
  return !t.device().is_cuda() || reinterpret_cast<uintptr_t>(t.storage()->data()) % 16 == 0;
}
}  // namespace

Tensor GraphBuilder::input_tracer(const Shape& sizes, const Shape& strides, DType dtype,
                                  Device device, int index, bool aligned) {
  Buffer b;
  b.kind = BufferKind::Input;
  b.dtype = dtype;
  b.device = device;
  b.extent = detail::storage_extent(sizes, strides, 0);
  b.input_index = index;
  next_input_ = std::max(next_input_, index + 1);
  b.aligned = aligned;
  int id = graph.add_buffer(std::move(b));
  ++graph.num_inputs;
  bound_.emplace_back(id, storage_for(id));
  return view_of(id, sizes, strides, 0);
}

Tensor GraphBuilder::add_input(const detail::OutMeta& meta, int index) {
  return input_tracer(meta.sizes, detail::contiguous_strides(meta.sizes), meta.dtype, meta.device,
                      index, true);
}

Tensor GraphBuilder::add_input(const Tensor& arg, int index) {
  Tensor t = input_tracer(arg.sizes(), arg.strides(), arg.dtype(), arg.device(), index,
                          input_aligned(arg));
  // A C++ number keeps its low promotion priority (its value is still a graph input).
  t.impl()->wrapped_number = arg.is_wrapped_number();
  if (arg.requires_grad()) {
    // A leaf of the trace, standing for the argument: its .grad is the
    // argument's (a real tensor the graph reads and writes like state).
    if (!arg.is_leaf()) history_args_.push_back(index);
    t.requires_grad_(true);
    if (arg.grad().defined()) t.mutable_grad() = arg.grad();
    input_leaves_[t.impl()] = index;
  }
  return t;
}

void GraphBuilder::note_backward() {
  if (tracing_joint_backward) return;
  ran_backward = true;
  if (!history_args_.empty())
    throw GraphBreak("autograd",
                     fmt::format("argument {} requires grad and is the result of recorded ops "
                                 "(it has a grad_fn), and the function runs a backward pass: a "
                                 "compiled graph cannot extend the autograd graph it belongs to",
                                 history_args_.front()),
                     "pass a leaf (x.detach().requires_grad_()), or run the ops that made it "
                     "inside the compiled function");
}

int GraphBuilder::arg_of_leaf(const TensorImpl* leaf) const {
  auto it = input_leaves_.find(leaf);
  return it == input_leaves_.end() ? -1 : it->second;
}

void GraphBuilder::add_param(const Tensor& param, int index) {
  const auto& storage = param.storage();
  if (storage->is_tracer()) return;  // shares a storage with an earlier parameter
  Buffer b;
  b.kind = BufferKind::Param;
  b.dtype = param.dtype();
  b.device = param.device();
  b.extent = static_cast<int64_t>(storage->nbytes() / itemsize(param.dtype()));
  b.input_index = index;
  b.aligned = storage_aligned(param);  // the same storage at every call (guarded)
  int id = graph.add_buffer(std::move(b));
  ++graph.num_params;
  storage->set_trace(std::make_shared<TracedBuffer>(id));
  if (storages_.size() <= static_cast<size_t>(id)) storages_.resize(id + 1);
  storages_[id] = storage;
  swapped_params_.push_back(storage);
  bound_.emplace_back(id, storage);
}

void GraphBuilder::lift(const Tensor& t) {
  const Operand o = operand_of(t);  // its constant buffer (made if the function never read it)
  SMELT_INTERNAL_ASSERT(!o.is_scalar() && graph.buffers[o.buf].kind == BufferKind::Constant,
                        "lift: {} is not a constant", detail::shape_str(t.sizes()));
  graph.buffers[o.buf].written = true;
  const auto& storage = t.storage();
  storage->set_trace(std::make_shared<TracedBuffer>(o.buf));
  if (storages_.size() <= static_cast<size_t>(o.buf)) storages_.resize(o.buf + 1);
  storages_[o.buf] = storage;
  swapped_params_.push_back(storage);
  bound_.emplace_back(o.buf, storage);
}

bool GraphBuilder::is_real(const Tensor& t) const {
  if (!t.storage()->is_tracer()) return true;
  for (const auto& s : swapped_params_)
    if (s == t.storage()) return true;
  return false;
}

void GraphBuilder::note_grad(const Tensor& leaf, bool write) {
  const TensorImpl* impl = leaf.impl();
  if (slot_of_.count(impl)) return;
  auto arg = input_leaves_.find(impl);
  // Only the .grad of a tensor that outlives the trace (a real one, or an
  // argument's tracer, which stands for the argument) is state.
  if (arg == input_leaves_.end() && !is_real(leaf)) return;
  GradSlot s;
  s.leaf = leaf.impl_ptr();
  s.arg = arg == input_leaves_.end() ? -1 : arg->second;
  detail::AutogradMeta* m = leaf.impl()->autograd.get();
  if (m) s.entry = m->grad;
  s.guarded = !write;
  if (s.guarded && s.entry.defined() && is_real(s.entry)) {
    // The function reads the .grad it finds: a graph input, bound at each call
    // to the .grad of the moment (accumulating into it writes it back).
    s.input = next_input_;
    s.traced = add_input(s.entry, next_input_);
    m->grad = s.traced;
  }
  slot_of_[impl] = grad_slots.size();
  grad_slots.push_back(std::move(s));
}

long GraphBuilder::own_storage_refs(const Tensor& t) const {
  return t.defined() && t.storage()->is_tracer() && !is_real(t) ? 1 : 0;
}

void GraphBuilder::restore_grads() {
  for (auto& s : grad_slots)
    if (detail::AutogradMeta* m = s.leaf->autograd.get()) m->grad = s.entry;
}

void GraphBuilder::add_guard(std::function<std::string()> check) {
  host_guards.push_back(std::move(check));
}

void GraphBuilder::on_abort(std::function<void()> undo) { undo_.push_back(std::move(undo)); }

void GraphBuilder::abort() {
  for (auto it = undo_.rbegin(); it != undo_.rend(); ++it) (*it)();
  undo_.clear();
}

Operand GraphBuilder::operand_of(const Tensor& t) {
  Operand o;
  o.dtype = t.dtype();
  if (t.is_tracer()) {
    o.buf = current_buffer(t);
    o.sizes = t.sizes();
    o.strides = t.strides();
    o.offset = t.storage_offset();
    return o;
  }
  if (t.is_wrapped_number()) {
    o.scalar = t.item();
    return o;
  }
  const Storage* key = t.storage().get();
  auto it = constants_.find(key);
  int id;
  if (it != constants_.end() && graph.buffers[it->second].dtype == t.dtype()) {
    id = it->second;
  } else {
    Buffer b;
    b.kind = BufferKind::Constant;
    b.dtype = t.dtype();
    b.device = t.device();
    b.extent = static_cast<int64_t>(t.storage()->nbytes() / itemsize(t.dtype()));
    b.constant = t;
    b.captured = t.storage()->serial() < graph.trace_serial;
    b.aligned = storage_aligned(t);
    id = graph.add_buffer(std::move(b));
    constants_[key] = id;
  }
  o.buf = id;
  o.sizes = t.sizes();
  o.strides = t.strides();
  o.offset = t.storage_offset();
  return o;
}

std::vector<Tensor> GraphBuilder::record(const std::string& op, const std::vector<Tensor>& inputs,
                                         const detail::Attrs& attrs,
                                         const std::vector<detail::OutMeta>& outs) {
  std::vector<Operand> operands;
  operands.reserve(inputs.size());
  for (auto& t : inputs) operands.push_back(operand_of(t));
  int n = graph.add_node(op, std::move(operands), attrs, outs);
  std::vector<Tensor> results;
  for (int b : graph.nodes[n].outputs)
    results.push_back(
        view_of(b, graph.buffers[b].sizes, detail::contiguous_strides(graph.buffers[b].sizes), 0));
  return results;
}

void GraphBuilder::record_copy(const Tensor& dst, const Tensor& src) {
  if (!dst.is_tracer()) {
    if (dst.is_wrapped_number())
      throw GraphBreak("copy_",
                       "writes into a C++ number passed as a tensor, which the graph holds as a "
                       "constant",
                       "pass a real tensor (smelt::scalar_tensor) to write into");
    // A captured tensor (an optimizer's parameter or state) or one the function
    // made: its final value is written back at every call.
    lift(dst);
  }
  int base = current_buffer(dst);
  // The source, broadcast to the destination's shape (operand_of may add a
  // constant buffer, so `b` is a copy taken afterwards, not a reference).
  Operand s = operand_of(src);
  const Buffer b = graph.buffers[base];
  if (!s.is_scalar()) {
    Shape strides(dst.dim(), 0);
    int64_t lead = dst.dim() - static_cast<int64_t>(s.sizes.size());
    for (size_t d = 0; d < s.sizes.size(); ++d)
      if (s.sizes[d] != 1) strides[lead + d] = s.strides[d];
    s.sizes = dst.sizes();
    s.strides = strides;
  }
  Operand d;
  d.buf = base;
  d.sizes = dst.sizes();
  d.strides = dst.strides();
  d.offset = dst.storage_offset();
  d.dtype = dst.dtype();
  int out;
  if (is_whole_contiguous(d, b)) {
    // The write covers the whole buffer: its new value is simply src converted.
    int n = graph.add_node("to_dtype", {s}, {{"dtype", dst.dtype()}},
                           {{dst.sizes(), dst.dtype(), dst.device()}});
    // The new buffer keeps dst's shape, so that the node's output and input agree.
    out = graph.nodes[n].outputs[0];
  } else {
    detail::Attrs a{
        {"sizes", dst.sizes()}, {"strides", dst.strides()}, {"offset", dst.storage_offset()}};
    Operand flat = whole(b);  // the old contents, read flat like the output
    flat.sizes = {b.extent};
    flat.strides = {1};
    int n = graph.add_node("copy_", {flat, s}, a, {{{b.extent}, b.dtype, b.device}});
    out = graph.nodes[n].outputs[0];
  }
  // Functionalization: the storage now holds the new buffer.
  dst.storage()->set_trace(std::make_shared<TracedBuffer>(out));
  if (storages_.size() <= static_cast<size_t>(out)) storages_.resize(out + 1);
  storages_[out] = dst.storage();
}

void GraphBuilder::record_assign(const Tensor& dst, const Tensor& src) {
  if (!dst.is_tracer() && !dst.is_wrapped_number()) lift(dst);
  if (dst.is_tracer() && src.is_tracer() && dst.dtype() == src.dtype()) {
    const int base = current_buffer(dst), from = current_buffer(src);
    const Buffer b = graph.buffers[base];
    Operand d;
    d.buf = base;
    d.sizes = dst.sizes();
    d.strides = dst.strides();
    d.offset = dst.storage_offset();
    d.dtype = dst.dtype();
    const Buffer& f = graph.buffers[from];
    if (f.kind == BufferKind::Node && is_whole_contiguous(d, b) &&
        is_whole_contiguous(operand_of(src), f) && f.extent == b.extent) {
      // dst's memory now is src's buffer (functionalization without a copy).
      dst.storage()->set_trace(std::make_shared<TracedBuffer>(from));
      return;
    }
  }
  record_copy(dst, src);
}

bool GraphBuilder::captures(const std::vector<Tensor>& inputs) const {
  for (auto& t : inputs)
    if (t.defined() && !t.is_tracer() && !t.is_wrapped_number() && t.storage() &&
        t.storage()->serial() < graph.trace_serial)
      return true;
  return false;
}

void GraphBuilder::record_random(const std::string& op) {
  throw GraphBreak(op,
                   "random ops are not captured by smelt::compile yet (they draw from the global "
                   "generator)",
                   op == "rand" || op == "randn" || op == "randint" || op == "bernoulli"
                       ? "draw the random tensor outside the compiled function and pass it as an "
                         "argument"
                       : "compile the model in eval() mode or with a dropout probability of 0 "
                         "(training-mode dropout draws random numbers)");
}

void GraphBuilder::finish(const std::vector<Tensor>& outputs) {
  for (auto& t : outputs) graph.outputs.push_back(operand_of(t));
  num_results = static_cast<int>(outputs.size());
  // Every .grad the function replaced: its final value is a result too.
  for (size_t i = 0; i < grad_slots.size(); ++i) {
    const GradSlot& s = grad_slots[i];
    const detail::AutogradMeta* m = s.leaf->autograd.get();
    const Tensor now = m ? m->grad : Tensor();
    // Untouched, or written in place (the write-back of an input).
    if (now.impl() == s.entry.impl() || (s.traced.defined() && now.impl() == s.traced.impl()))
      continue;
    GradEffect e;
    e.slot = static_cast<int>(i);
    if (now.defined()) {
      e.output = static_cast<int>(graph.outputs.size());
      graph.outputs.push_back(operand_of(now));
    }
    grad_effects.push_back(e);
  }
  for (auto& [orig, storage] : bound_) {
    int now = dynamic_cast<TracedBuffer*>(storage->trace().get())->buf;
    if (now != orig) graph.mutations.emplace_back(orig, now);
  }
}

}  // namespace smelt::compiler
