#include "compiler/passes/passes.h"

#include <fmt/format.h>

#include <map>
#include <unordered_map>

#include "backend/backend.h"
#include "compiler/trace/tracer.h"
#include "core/tensor_impl.h"
#include "ops/decompose.h"
#include "ops/op_call.h"
#include "ops/op_table.h"
#include "smelt/ops.h"

namespace smelt::compiler {

std::string PassStats::str() const {
  return fmt::format("dce removed {} node(s), cse merged {}, decomposed {}, folded {}",
                     removed_dead, merged_common, decomposed, folded);
}

std::vector<bool> live_nodes(const Graph& g) {
  std::vector<bool> live_buf(g.buffers.size(), false), live(g.nodes.size(), false);
  for (auto& o : g.outputs)
    if (!o.is_scalar()) live_buf[o.buf] = true;
  for (auto& [dst, src] : g.mutations) live_buf[src] = true;
  for (int n = static_cast<int>(g.nodes.size()) - 1; n >= 0; --n) {
    for (int o : g.nodes[n].outputs)
      if (live_buf[o]) live[n] = true;
    if (!live[n]) continue;
    for (auto& in : g.nodes[n].inputs)
      if (!in.is_scalar()) live_buf[in.buf] = true;
  }
  return live;
}

namespace {

/// Appends the bytes of each value to a CSE key.
template <class... T>
void append_key(std::string& key, T... values) {
  (key.append(reinterpret_cast<const char*>(&values), sizeof(values)), ...);
}

/// The start of a node's CSE key: its op and attributes.
std::string key_prefix(const Node& n) {
  std::string key = n.op;
  key += '|';
  key += n.attrs.str();
  return key;
}

/// Appends what one input of a node reads to its CSE key: the operand `now`
/// (a window of a buffer of the new graph, or an exact scalar) or, when
/// `real` is not null, a window of that real tensor's storage.
void append_input_key(std::string& key, const Operand& now, const void* real) {
  key += '|';
  if (now.is_scalar()) {
    append_key(key, 's', static_cast<int64_t>(now.scalar->kind()), static_cast<int64_t>(now.dtype));
    if (now.scalar->is_floating())
      append_key(key, now.scalar->to_double());
    else
      append_key(key, now.scalar->to_int());
    return;
  }
  if (real)
    append_key(key, 'c', reinterpret_cast<intptr_t>(real));
  else
    append_key(key, 't', static_cast<int64_t>(now.buf));
  append_key(key, static_cast<int64_t>(now.dtype), now.offset,
             static_cast<int64_t>(now.sizes.size()));
  for (size_t d = 0; d < now.sizes.size(); ++d) append_key(key, now.sizes[d], now.strides[d]);
}

/// Whether a real (non-tracer) input lets its node fold: only constants the
/// function created and never writes fold; a captured tensor is read at every
/// call, a written one changes from call to call.
bool folds(const Graph& g, const Operand& in) {
  if (in.is_scalar()) return true;
  const Buffer& b = g.buffers[in.buf];
  return !(b.kind == BufferKind::Constant && (b.captured || b.written));
}

bool foldable(const std::string& op) {
  const detail::OpDef* def = detail::find_op(op);
  if (!def) return false;
  using K = detail::OpKind;
  return def->kind == K::Pointwise || def->kind == K::Reduction || def->kind == K::Movement ||
         def->kind == K::Extern;
}

/// The decomposition the passes expand node `n` of `g` with, or nullptr for
/// a primitive and for a composite kept whole because its backend runs it as
/// one kernel that fusion could not match (a fallback step then calls the op):
/// scaled_dot_product_attention without dropout where the graph's backend
/// has a fused kernel for q's dtype and head dim (Backend::
/// has_fused_attention; CUDA: float16 / bfloat16, head dims 32 and 64 on
/// smelt's FlashAttention-2 kernel, multiples of 8 up to 128 on cuDNN's,
/// float32 head dims 32 and 64 on attention_f32.cu's; CPU:
/// float32), with at most a bool or floating attn_mask of rank 4 or
/// less (where the kernel declines a call at run time, the op decomposes
/// eagerly).
const detail::Decomposition* decomposition_of(const Graph& g, const Node& n,
                                              std::optional<DeviceType> planned_for = {}) {
  const detail::Decomposition* d = detail::find_decomposition(n.op);
  if (!d || n.op != "scaled_dot_product_attention") return d;
  const Operand& q = n.inputs[0];
  const DeviceType dev = planned_for ? *planned_for : g.buffers[q.buf].device.type;
  // A device whose backend this build lacks (CUDA code generated without
  // CUDA, as --codegen-only does) has no fused attention: decompose.
  const backend::Backend* b = backend::find_backend(dev);
  bool whole = b && q.sizes.size() == 4 && n.attrs.as<double>("dropout_p") == 0 &&
               b->has_fused_attention(q.dtype, q.sizes[3], n.attrs.as<bool>("has_attn_mask"));
  if (whole && n.attrs.as<bool>("has_attn_mask")) {
    const Operand& m = n.inputs[3];
    whole = !m.is_scalar() && m.sizes.size() <= 4 &&
            (m.dtype == DType::Bool || m.dtype == DType::Float32 || m.dtype == q.dtype);
  }
  return whole ? nullptr : d;
}

class Replayer {
 public:
  Replayer(const Graph& g, const PassOptions& o, PassStats& s)
      : src_(g), opts_(o), stats_(s), nb_(g.trace_serial) {}

  Graph run() {
    value_.resize(src_.buffers.size());
    returned_.assign(src_.buffers.size(), false);
    for (auto& o : src_.outputs)
      if (!o.is_scalar()) returned_[o.buf] = true;
    // Inputs, parameters and constants keep their identity.
    for (auto& b : src_.buffers) {
      if (b.kind == BufferKind::Node) continue;
      if (b.kind == BufferKind::Constant) {
        value_[b.id] = b.constant;
        continue;
      }
      Buffer copy = b;
      int id = nb_.graph.add_buffer(copy);
      if (b.kind == BufferKind::Input) ++nb_.graph.num_inputs;
      if (b.kind == BufferKind::Param) ++nb_.graph.num_params;
      input_map_[b.id] = id;
      value_[b.id] = nb_.view_of(id, {b.extent}, {1}, 0);
    }
    std::vector<bool> live =
        opts_.dce ? live_nodes(src_) : std::vector<bool>(src_.nodes.size(), true);
    TraceScope scope(&nb_);
    for (size_t n = 0; n < src_.nodes.size(); ++n) {
      if (!live[n]) {
        ++stats_.removed_dead;
        continue;
      }
      replay(src_.nodes[n]);
    }
    std::vector<Tensor> outs;
    for (auto& o : src_.outputs) outs.push_back(tensor_of(o));
    for (auto& t : outs) nb_.graph.outputs.push_back(nb_.operand_of(t));
    for (auto& [dst, srcbuf] : src_.mutations) {
      Tensor v = tensor_of(whole(src_.buffers[srcbuf]));
      Operand o = nb_.operand_of(v);
      if (o.is_scalar() || o.buf < 0 || !is_whole_contiguous(o, nb_.graph.buffers[o.buf]) ||
          nb_.graph.buffers[o.buf].kind != BufferKind::Node) {
        // Materialize so that the write-back copies one dense buffer.
        Tensor c = smelt::clone(v.is_tracer() ? v : v);
        o = nb_.operand_of(c);
        if (!c.is_tracer()) {  // a folded constant: copy it through a clone node
          int node = nb_.graph.add_node("clone", {o}, {}, {{c.sizes(), c.dtype(), c.device()}});
          o = whole(nb_.graph.buffers[nb_.graph.nodes[node].outputs[0]]);
        }
      }
      nb_.graph.mutations.emplace_back(new_buffer_of(dst), o.buf);
    }
    // Writes a decomposition made into an input or parameter (batch_norm's
    // running stats): the storage was rebound to the buffer holding the new value.
    for (auto& [old_id, id] : input_map_) {
      auto* tb = dynamic_cast<TracedBuffer*>(value_[old_id].storage()->trace().get());
      bool known = false;
      for (auto& m : nb_.graph.mutations) known |= m.first == id;
      if (tb && tb->buf != id && !known) nb_.graph.mutations.emplace_back(id, tb->buf);
    }
    return std::move(nb_.graph);
  }

 private:
  /// The new graph's buffer for old input, parameter or (written) constant `dst`.
  int new_buffer_of(int dst) {
    const Buffer& b = src_.buffers[dst];
    if (b.kind != BufferKind::Constant) return input_map_.at(dst);
    const Operand c = nb_.operand_of(b.constant);
    SMELT_INTERNAL_ASSERT(!c.is_scalar(), "replay: written constant %{} is a number", dst);
    nb_.graph.buffers[c.buf].written = true;
    return c.buf;
  }

  /// The tensor (tracer in the new graph, or a real constant) an old operand reads.
  Tensor tensor_of(const Operand& o) {
    if (o.is_scalar()) return nb_.view_of(o);
    const Tensor& base = value_[o.buf];
    SMELT_INTERNAL_ASSERT(base.defined(), "replay: buffer %{} has no value", o.buf);
    const Buffer& b = src_.buffers[o.buf];
    if (b.kind == BufferKind::Constant)
      return detail::make_view(base, o.sizes, o.strides, o.offset);
    // `base` is a dense view of the new buffer (or a real folded tensor) with
    // the old buffer's flat layout; re-apply the window on top of it.
    return detail::make_view(base, o.sizes, o.strides, base.storage_offset() + o.offset);
  }

  void bind_outputs(const Node& n, const std::vector<Tensor>& results) {
    SMELT_INTERNAL_ASSERT(results.size() == n.outputs.size(), "{}: {} results for {} outputs", n.op,
                          results.size(), n.outputs.size());
    auto dense = [&](const Tensor& t) {
      Operand o = nb_.operand_of(t);
      return is_whole_contiguous(o, nb_.graph.buffers[o.buf]);
    };
    for (size_t k = 0; k < results.size(); ++k) {
      Tensor r = results[k];
      const Buffer& ob = src_.buffers[n.outputs[k]];
      // Old consumers index the output as a dense row-major block.
      if (r.is_tracer()) {
        if (!dense(r) || r.dtype() != ob.dtype) {
          r = smelt::clone(r.to(ob.dtype));
          if (!dense(r)) r = smelt::clone(r);
        }
      } else if (!r.is_contiguous() || r.dtype() != ob.dtype) {
        r = smelt::clone(r.to(ob.dtype));
      }
      value_[n.outputs[k]] = detail::make_view(r, {ob.extent}, {1}, r.storage_offset());
    }
  }

  void replay(const Node& n) {
    std::vector<Tensor> inputs;
    bool all_const = true;
    // The CSE key: the op, its attributes and what each input reads (a window
    // of a new buffer, an exact scalar, or a window of a constant's storage).
    std::string key = key_prefix(n);
    for (auto& in : n.inputs) {
      inputs.push_back(tensor_of(in));
      const Tensor& t = inputs.back();
      if (t.is_tracer() || !folds(src_, in)) all_const = false;
      if (t.is_tracer())
        append_input_key(key, nb_.operand_of(t), nullptr);
      else
        append_input_key(key, in, in.is_scalar() ? nullptr : t.storage().get());
    }
    // A node whose result the function returns is its own tensor in eager mode
    // (x + 1, x + 1 are two tensors): it is never merged into another.
    bool returned = false;
    for (int o : n.outputs) returned |= returned_[o];
    if (opts_.cse && !returned) {
      auto it = seen_.find(key);
      if (it != seen_.end()) {
        ++stats_.merged_common;
        for (size_t k = 0; k < n.outputs.size(); ++k) value_[n.outputs[k]] = value_[it->second[k]];
        return;
      }
      seen_[key] = n.outputs;
    }
    if (opts_.fold_constants && all_const && !inputs.empty() && foldable(n.op)) {
      ++stats_.folded;
      TraceScope eager(nullptr);
      // Pointwise nodes record their computation dtype, which the op itself
      // derives (and call_op does not accept); to_dtype's dtype is its argument.
      detail::Attrs attrs = n.attrs;
      if (n.op != "to_dtype" && detail::find_op(n.op)->kind == detail::OpKind::Pointwise)
        std::erase_if(attrs.items, [](const auto& kv) { return kv.first == "dtype"; });
      bind_outputs(n, detail::call_op(n.op, inputs, attrs));
      return;
    }
    const detail::Decomposition* d =
        opts_.decompose ? decomposition_of(src_, n, opts_.planned_for) : nullptr;
    if (d) {
      ++stats_.decomposed;
      bind_outputs(n, (*d)(inputs, n.attrs));
      return;
    }
    std::vector<detail::OutMeta> metas;
    for (int o : n.outputs) {
      const Buffer& b = src_.buffers[o];
      metas.push_back({b.sizes, b.dtype, b.device});
    }
    std::vector<Tensor> results = nb_.record(n.op, inputs, n.attrs, metas);
    bind_outputs(n, results);
  }

  const Graph& src_;
  PassOptions opts_;
  PassStats& stats_;
  GraphBuilder nb_;
  std::vector<Tensor> value_;  // old buffer -> its value (dense view) in the new graph
  std::map<int, int> input_map_;
  std::unordered_map<std::string, std::vector<int>> seen_;
  std::vector<bool> returned_;  // old buffers the function returns
};

/// Whether replaying `g` with `opts` could give another graph than `g`: it
/// has write-backs (which the replay derives again), or a pass applies to a
/// node — DCE to a dead node, decomposition to a composite, folding to a node
/// over constants the function created, CSE to a node that repeats an earlier
/// one (with the replay's tests and keys, on the graph as it is: while
/// nothing changes, the replay's new graph is `g` buffer for buffer).
bool replay_changes(const Graph& g, const PassOptions& opts) {
  if (!g.mutations.empty()) return true;
  if (opts.dce)
    for (bool live : live_nodes(g))
      if (!live) return true;
  std::vector<bool> returned(g.buffers.size(), false);
  for (auto& o : g.outputs)
    if (!o.is_scalar()) returned[o.buf] = true;
  auto key_of = [&](const Node& n) {
    std::string key = key_prefix(n);
    for (auto& in : n.inputs) {
      const bool real = !in.is_scalar() && g.buffers[in.buf].kind == BufferKind::Constant;
      append_input_key(key, in, real ? g.buffers[in.buf].constant.storage().get() : nullptr);
    }
    return key;
  };
  // CSE: the first node of each key hash. A hash seen before is a repeated
  // node, or (different keys, vanishingly rare) taken as one: the replay then
  // runs and decides.
  std::unordered_map<size_t, size_t> seen;
  seen.reserve(g.nodes.size());
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    if (opts.decompose && decomposition_of(g, n, opts.planned_for)) return true;
    bool all_const = true;
    for (auto& in : n.inputs) {
      const bool tracer = !in.is_scalar() && g.buffers[in.buf].kind != BufferKind::Constant;
      if (tracer || !folds(g, in)) all_const = false;
    }
    if (opts.fold_constants && all_const && !n.inputs.empty() && foldable(n.op)) return true;
    // The replay clones a recorded result that is not one dense block (bind_outputs).
    for (int o : n.outputs) {
      Operand r = whole(g.buffers[o]);
      if (!is_whole_contiguous(r, g.buffers[o])) return true;
    }
    bool ret = false;
    for (int o : n.outputs) ret = ret || returned[o];
    if (!opts.cse || ret) continue;
    if (!seen.emplace(std::hash<std::string>{}(key_of(n)), i).second) return true;
  }
  return false;
}

}  // namespace

bool has_composites(const Graph& g) {
  for (auto& n : g.nodes)
    if (decomposition_of(g, n)) return true;
  return false;
}

Graph run_passes(Graph&& g, const PassOptions& opts, PassStats* stats) {
  if (opts.keep_unchanged && !replay_changes(g, opts)) return std::move(g);
  return run_passes(static_cast<const Graph&>(g), opts, stats);
}

Graph run_passes(const Graph& g, const PassOptions& opts, PassStats* stats) {
  if (opts.keep_unchanged && !replay_changes(g, opts)) return g;
  PassStats local;
  PassStats& st = stats ? *stats : local;
  Graph out = Replayer(g, opts, st).run();
  // A decomposition may use other composites (sdpa uses softmax): repeat until
  // only primitives are left.
  for (int round = 0; opts.decompose && round < 8 && has_composites(out); ++round)
    out = Replayer(out, opts, st).run();
  return out;
}

}  // namespace smelt::compiler
