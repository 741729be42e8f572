#include "compiler/fusion/scheduler.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include "compiler/fusion/in_place.h"
#include "compiler/fusion/kernel_config.h"
#include "compiler/fusion/legality.h"
#include "core/tensor_impl.h"
#include "ops/decompose.h"
#include "ops/op_table.h"

namespace smelt::compiler {

namespace {

class Scheduler {
 public:
  Scheduler(const Graph& g, const FusionOptions& o, Target t) : g_(g), opts_(o), target_(t) {}

  Schedule run() {
    users_.assign(g_.buffers.size(), {});
    for (size_t n = 0; n < g_.nodes.size(); ++n)
      for (auto& in : g_.nodes[n].inputs)
        if (!in.is_scalar()) users_[in.buf].push_back(static_cast<int>(n));
    escapes_ = g_.escaping();
    absorbed_.assign(g_.nodes.size(), false);
    plan_gemm_epilogues();
    plan_gemm_prologues();
    decide_materialization();
    for (size_t n = 0; n < g_.nodes.size(); ++n)
      if (!absorbed_[n]) place(static_cast<int>(n));
    if (opts_.fuse) fold_permuted_copies();
    finalize_names();
    plan_in_place_writes(g_, s_);
    return std::move(s_);
  }

 private:
  void log(const std::string& m) { s_.decisions.push_back(m); }

  // ---- GEMM + epilogue -------------------------------------------------------
  int single_user(int buf) const {
    if (escapes_[buf] || users_[buf].size() != 1) return -1;
    return users_[buf][0];
  }

  /// True when buffer `b` exists before node `node` runs.
  bool ready_before(int b, int node) const {
    const Buffer& buf = g_.buffers[b];
    return buf.kind != BufferKind::Node || buf.producer < node;
  }

  void plan_gemm_epilogues() {
    for (size_t i = 0; i < g_.nodes.size(); ++i) {
      const Node& n = g_.nodes[i];
      if (classify(n) != LoopKind::Extern) continue;
      Step st;
      st.kind = Step::Kind::Extern;
      st.node = static_cast<int>(i);
      st.kernel_kind = "extern";
      int out = n.outputs[0];
      const Buffer& ob = g_.buffers[out];
      // A 1-D operand drops a dim from the result: a bias along the last
      // dim would no longer be a per-column bias, so those keep their adds.
      // float16 / bfloat16 epilogues run on the float32 product and round
      // once (backend.h's Gemm), so they fold only where intermediates need
      // not round as eager stores them, or for linear's own bias, which
      // eager adds before its one rounding too (detail::add_gemm_bias): then
      // the bias alone, since eager rounds before what follows.
      const DType dt = ob.dtype;
      const bool half = dt == DType::Float16 || dt == DType::BFloat16;
      const bool shaped = opts_.gemm_epilogue && opts_.fuse && n.inputs[0].sizes.size() >= 2 &&
                          n.inputs[1].sizes.size() >= 2;
      int u = shaped ? single_user(out) : -1;
      const bool linear_bias = u >= 0 && g_.nodes[u].attrs.has("gemm_bias");
      const bool rounds_after_bias = half && opts_.round_intermediates;
      const bool eligible =
          shaped && (dt == DType::Float32 || (half && !rounds_after_bias) || (half && linear_bias));
      // bias add: add(mm, bias[n]) with bias broadcast along rows
      if (!eligible) u = -1;
      if (u >= 0 && g_.nodes[u].op == "add" && g_.nodes[u].inputs.size() == 2 &&
          !g_.nodes[u].attrs.has("alpha_not_one")) {
        const Node& a = g_.nodes[u];
        int mm_side = (!a.inputs[0].is_scalar() && a.inputs[0].buf == out) ? 0 : 1;
        const Operand& mmo = a.inputs[mm_side];
        const Operand& bo = a.inputs[1 - mm_side];
        bool alpha_one = !a.attrs.has("alpha") || a.attrs.as<Scalar>("alpha").to_double() == 1.0;
        int64_t ncol = ob.sizes.back();
        bool bias_ok = !bo.is_scalar() && bo.dtype == dt && alpha_one && !bo.sizes.empty() &&
                       bo.sizes.back() == ncol && (bo.strides.back() == 1 || ncol == 1) &&
                       is_whole_contiguous(mmo, ob) && g_.buffers[a.outputs[0]].sizes == ob.sizes &&
                       g_.buffers[a.outputs[0]].dtype == dt;
        if (bias_ok && !ready_before(bo.buf, static_cast<int>(i))) bias_ok = false;
        for (size_t d = 0; bias_ok && d + 1 < bo.sizes.size(); ++d)
          if (bo.sizes[d] != 1 && bo.strides[d] != 0) bias_ok = false;
        if (bias_ok) {
          st.epilogue.push_back(u);
          st.bias = 1 - mm_side;
          absorbed_[u] = true;
          int cur = a.outputs[0];
          int v = rounds_after_bias ? -1 : single_user(cur);
          EpilogueActivation act =
              v >= 0 ? detail::epilogue_activation(g_.nodes[v].op, g_.nodes[v].attrs)
                     : EpilogueActivation::None;
          if (act != EpilogueActivation::None && g_.buffers[g_.nodes[v].outputs[0]].dtype == dt &&
              is_whole_contiguous(g_.nodes[v].inputs[0], g_.buffers[cur])) {
            st.activation = std::string(epilogue_activation_name(act));
            st.epilogue.push_back(v);
            absorbed_[v] = true;
          }
          // residual add: add(cur, r) with r dense and of the result's shape
          cur = g_.nodes[st.epilogue.back()].outputs[0];
          int w = rounds_after_bias ? -1 : single_user(cur);
          if (w >= 0 && g_.nodes[w].op == "add" && g_.nodes[w].inputs.size() == 2) {
            const Node& ra = g_.nodes[w];
            bool alpha1 = !ra.attrs.has("alpha") || ra.attrs.as<Scalar>("alpha").to_double() == 1.0;
            int side = (!ra.inputs[0].is_scalar() && ra.inputs[0].buf == cur) ? 0 : 1;
            const Operand& other = ra.inputs[1 - side];
            bool dense = !other.is_scalar() && other.dtype == dt && other.sizes == ob.sizes &&
                         other.offset == 0 && other.strides == detail::contiguous_strides(ob.sizes);
            if (alpha1 && dense && ready_before(other.buf, static_cast<int>(i)) &&
                is_whole_contiguous(ra.inputs[side], g_.buffers[cur]) &&
                g_.buffers[ra.outputs[0]].dtype == dt) {
              st.residual = 1 - side;
              st.epilogue.push_back(w);
              absorbed_[w] = true;
            }
          }
        }
      }
      if (!st.epilogue.empty()) {
        st.kernel_kind = "tem";
        log(fmt::format(
            "fuse {} + epilogue [{}] into one GEMM call: bias{} applied where the GEMM writes its "
            "result (oneDNN post-ops){}{}",
            n.op, epilogue_ops(st), st.activation.empty() ? "" : " and activation",
            st.residual >= 0 ? ", then the residual added in the same pass" : "",
            rounds_after_bias ? "; linear's bias only: eager rounds its float16 / bfloat16 result "
                                "before the ops after it (round_intermediates)"
                              : ""));
      } else if (classify(n) == LoopKind::Extern) {
        log(fmt::format("no epilogue for {} (%{}): {}", n.op, out,
                        !eligible ? "only float32 GEMMs take post-ops (float16 / bfloat16 "
                                    "ones: linear's bias, or any without round_intermediates)"
                                  : "its result is not consumed by a single bias add"));
      }
      extern_steps_[static_cast<int>(i)] = st;
    }
  }

  /// CUDA: a GEMM whose operands are both float16 / bfloat16 values converted
  /// to float32 reads the values themselves and writes float32
  /// (gemm_cast_prologue). A convert read only by such GEMMs is not computed:
  /// its source is stored instead, at half the bytes.
  void plan_gemm_prologues() {
    if (target_ != Target::Cuda || !opts_.fuse || !opts_.gemm_epilogue) return;
    std::set<int> prologue_reads;  // convert outputs the prologues read through
    for (auto& [node, st] : extern_steps_) {
      const Node& n = g_.nodes[node];
      if (!st.epilogue.empty()) continue;
      const std::optional<std::array<Operand, 2>> src = gemm_cast_prologue(g_, n);
      if (!src) continue;
      st.cast_prologue = true;
      for (size_t k = 0; k < 2; ++k) {
        prologue_sources_.insert((*src)[k].buf);
        prologue_reads.insert(n.inputs[k].buf);
      }
      log(fmt::format(
          "fold the converts of {} (%{}) into the GEMM: one {} GEMM with a float32 "
          "result reads %{} and %{}",
          n.op, n.outputs[0], dtype_name((*src)[0].dtype), (*src)[0].buf, (*src)[1].buf));
    }
    for (int b : prologue_reads) {
      if (escapes_[b]) continue;
      bool only_prologues = true;
      for (int u : users_[b]) {
        auto it = extern_steps_.find(u);
        only_prologues &= it != extern_steps_.end() && it->second.cast_prologue;
      }
      if (!only_prologues) continue;
      absorbed_[g_.buffers[b].producer] = true;
      unused_converts_.insert(b);
    }
  }

  std::string epilogue_ops(const Step& st) const {
    std::vector<std::string> v;
    for (int e : st.epilogue) v.push_back(g_.nodes[e].op);
    return fmt::format("{}", fmt::join(v, ", "));
  }

  int extern_output(const Step& st) const {
    int last = st.epilogue.empty() ? st.node : st.epilogue.back();
    return g_.nodes[last].outputs[0];
  }

  // ---- materialization -------------------------------------------------------
  void decide_materialization() {
    s_.materialized.assign(g_.buffers.size(), false);
    ops_.assign(g_.nodes.size(), 1);
    visit_.assign(g_.nodes.size(), 0);
    for (auto& b : g_.buffers)
      if (b.kind != BufferKind::Node) s_.materialized[b.id] = true;
    for (size_t i = 0; i < g_.nodes.size(); ++i) {
      const Node& n = g_.nodes[i];
      LoopKind k = classify(n);
      for (int o : n.outputs) {
        bool m = escapes_[o] || k != LoopKind::Pointwise || !opts_.fuse;
        for (int u : users_[o]) {
          LoopKind uk = classify(g_.nodes[u]);
          if ((uk == LoopKind::Extern || uk == LoopKind::Fallback) && !absorbed_[u]) m = true;
          if (absorbed_[u]) m = true;  // read by a GEMM epilogue (e.g. the bias) or prologue
        }
        if (prologue_sources_.count(o)) m = true;
        s_.materialized[o] = m;
      }
      if (k == LoopKind::Pointwise || k == LoopKind::Reduction || k == LoopKind::Scan)
        count_ops(static_cast<int>(i));
    }
    for (auto& [node, st] : extern_steps_) {
      for (int e : st.epilogue) s_.materialized[g_.nodes[e].outputs[0]] = false;
      s_.materialized[g_.nodes[node].outputs[0]] = st.epilogue.empty();
      s_.materialized[extern_output(st)] = true;
    }
    for (int b : unused_converts_) s_.materialized[b] = false;
  }

  // ---- kernel length -----------------------------------------------------------
  /// The inlined producer of operand `o` (a pointwise node whose output is not
  /// materialized), or -1.
  int inlined_producer(const Operand& o) const {
    if (o.is_scalar()) return -1;
    const Buffer& b = g_.buffers[o.buf];
    if (b.kind != BufferKind::Node || s_.materialized[o.buf]) return -1;
    return classify(g_.nodes[b.producer]) == LoopKind::Pointwise ? b.producer : -1;
  }

  /// Sets ops_[i], the ops a kernel computes for node `i` (the node and its
  /// inlined producers), and materializes a pointwise output whose count
  /// exceeds kMaxKernelOps, so that no kernel grows without bound. The count
  /// adds the producers' counts (each producer once per node), which counts a
  /// producer shared by two inputs twice; above the cap it is recounted
  /// exactly, by a walk that stops past the cap.
  void count_ops(int i) {
    const Node& n = g_.nodes[i];
    int64_t ops = 1;
    for (size_t k = 0; k < n.inputs.size(); ++k) {
      int p = inlined_producer(n.inputs[k]);
      bool repeated = false;
      for (size_t j = 0; j < k && p >= 0 && !repeated; ++j)
        repeated = inlined_producer(n.inputs[j]) == p;
      if (p >= 0 && !repeated) ops += ops_[p];
    }
    if (ops > kMaxKernelOps) ops = exact_ops(i);
    ops_[i] = ops;
    if (ops <= kMaxKernelOps || !opts_.fuse || classify(n) != LoopKind::Pointwise) return;
    int out = n.outputs[0];
    if (s_.materialized[out]) return;
    s_.materialized[out] = true;
    log(
        fmt::format("materialize {} (%{}): it ends a chain of {} inlined ops (more than "
                    "kMaxKernelOps = {}); its consumers continue in another kernel",
                    n.op, out, ops, kMaxKernelOps));
  }

  /// The number of distinct nodes in node `i`'s inlined tree, counted up to
  /// kMaxKernelOps + 1.
  int64_t exact_ops(int i) {
    ++stamp_;
    std::vector<int> stack{i};
    visit_[i] = stamp_;
    int64_t count = 0;
    while (!stack.empty() && count <= kMaxKernelOps) {
      int cur = stack.back();
      stack.pop_back();
      ++count;
      for (auto& in : g_.nodes[cur].inputs) {
        int p = inlined_producer(in);
        if (p >= 0 && visit_[p] != stamp_) {
          visit_[p] = stamp_;
          stack.push_back(p);
        }
      }
    }
    return count;
  }

  // ---- placement ---------------------------------------------------------------
  /// Index of the step after which every buffer the node's tree reads from
  /// memory exists (-1: before the first step).
  int ready_after(int node) const {
    int after = -1;
    std::vector<int> stack{node};
    std::set<int> visited{node};
    while (!stack.empty()) {
      int cur = stack.back();
      stack.pop_back();
      for (auto& in : g_.nodes[cur].inputs) {
        if (in.is_scalar()) continue;
        const Buffer& b = g_.buffers[in.buf];
        if (b.kind != BufferKind::Node) continue;
        auto w = writer_step_.find(in.buf);
        if (w != writer_step_.end()) {
          after = std::max(after, w->second);
        } else if (classify(g_.nodes[b.producer]) == LoopKind::Pointwise &&
                   visited.insert(b.producer).second) {
          stack.push_back(b.producer);  // inlined: its own reads count
        }
      }
    }
    return after;
  }

  /// Policy: among the kernels the node may legally join (after every step it
  /// depends on), prefer one it reads from (vertical / epilogue), then one
  /// that reads the same buffers (horizontal), latest first.
  void place_in_kernel(int i, KernelGroup fresh) {
    const Node& n = g_.nodes[i];
    int first = ready_after(i);
    if (opts_.fuse) {
      int best = -1, best_score = -1;
      std::string best_why, last_no;
      // Only kernels that are not full: the candidates stay few however many
      // kernels the graph has.
      for (auto it = open_.rbegin(); it != open_.rend() && *it >= first; ++it) {
        const int k = *it;
        Step& st = s_.steps[k];
        if (fresh.reduction && (!st.group.reduction || fresh.scan != st.group.scan)) continue;
        if (step_ops_[k] + ops_[i] > kMaxKernelOps) {
          if (last_no.empty())
            last_no =
                fmt::format("kernel {}: it would compute {} ops, more than kMaxKernelOps = {}", k,
                            step_ops_[k] + ops_[i], kMaxKernelOps);
          continue;
        }
        FusionDecision d = can_join(g_, s_.materialized, st.group, i);
        if (!d) {
          if (last_no.empty()) last_no = fmt::format("kernel {}: {}", k, d.reason);
          continue;
        }
        int score = d.reason.rfind("horizontal", 0) == 0 ? 0 : 2;
        if (score == 0 && shares_reads(i, st.group)) score = 1;
        if (score > best_score) best = k, best_score = score, best_why = d.reason;
      }
      if (best >= 0) {
        Step& st = s_.steps[best];
        if (n.outputs.size() &&
            (classify(n) == LoopKind::Reduction || classify(n) == LoopKind::Scan))
          st.group.reductions.push_back(i);
        else
          st.group.stores.push_back(i);
        for (int o : n.outputs) writer_step_[o] = best;
        step_ops_[best] += ops_[i];
        if (full(best)) open_.erase(best), full_.insert(best);
        log(fmt::format("fuse {} (%{}) into kernel {}: {}", n.op, n.outputs[0], best, best_why));
        return;
      }
      if (last_no.empty() && !full_.empty() && *full_.rbegin() >= first)
        last_no = fmt::format(
            "kernel {}: it is full (kMaxKernelOps = {} ops or kMaxKernelOutputs = {} stores and "
            "reductions)",
            *full_.rbegin(), kMaxKernelOps, kMaxKernelOutputs);
      if (!s_.steps.empty())
        log(fmt::format(
            "new kernel for {} (%{}): {}", n.op, n.outputs[0],
            last_no.empty() ? "no earlier kernel it can join" : "no fuse with " + last_no));
    }
    Step st;
    st.kind = Step::Kind::Kernel;
    st.group = std::move(fresh);
    s_.steps.push_back(std::move(st));
    step_ops_.resize(s_.steps.size(), 0);
    step_ops_.back() = ops_[i];
    const int k = static_cast<int>(s_.steps.size()) - 1;
    (full(k) ? full_ : open_).insert(k);
    for (int o : n.outputs) writer_step_[o] = k;
  }

  /// A kernel that takes no more members: kMaxKernelOps ops, or
  /// kMaxKernelOutputs stores and reductions.
  bool full(int k) const {
    const KernelGroup& grp = s_.steps[k].group;
    return step_ops_[k] >= kMaxKernelOps ||
           static_cast<int64_t>(grp.stores.size() + grp.reductions.size()) >= kMaxKernelOutputs;
  }

  bool shares_reads(int node, const KernelGroup& grp) const {
    std::set<int> mine;
    for (auto& in : g_.nodes[node].inputs)
      if (!in.is_scalar()) mine.insert(in.buf);
    for (int m : grp.stores)
      for (auto& in : g_.nodes[m].inputs)
        if (!in.is_scalar() && mine.count(in.buf)) return true;
    return false;
  }

  void place(int i) {
    const Node& n = g_.nodes[i];
    LoopKind k = classify(n);
    if (k == LoopKind::Extern || k == LoopKind::Fallback) {
      Step st;
      if (k == LoopKind::Extern) {
        st = extern_steps_.at(i);
      } else if (const detail::OpDef* def = detail::find_op(n.op); def && def->multi_tensor) {
        // Named in finalize_names: <target>_for_<op>_<n>.
        st.kind = Step::Kind::Fallback;
        st.node = i;
        st.kernel_kind = "for";
        log(
            fmt::format("{} (%{}): one multi-tensor kernel of the backend over its {} tensors, "
                        "updating them in place where their old values are not read again",
                        n.op, n.outputs[0], n.inputs.size()));
      } else {
        st.kind = Step::Kind::Fallback;
        st.node = i;
        st.kernel_kind = "fallback";
        st.name = "fallback_" + n.op;
        log(fmt::format("{} (%{}) runs its eager kernel: no loop-level lowering for this op yet",
                        n.op, n.outputs[0]));
      }
      s_.steps.push_back(std::move(st));
      step_ops_.resize(s_.steps.size(), 0);
      int idx = static_cast<int>(s_.steps.size()) - 1;
      for (int o : n.outputs) writer_step_[o] = idx;
      if (k == LoopKind::Extern) writer_step_[extern_output(s_.steps.back())] = idx;
      return;
    }
    KernelGroup grp;
    if (k == LoopKind::Reduction || k == LoopKind::Scan) {
      ReductionInfo info = reduction_info(g_, n);
      grp.reduction = true;
      grp.scan = k == LoopKind::Scan;
      grp.shape = info.in_sizes;
      grp.rdims = info.dims;
      grp.reductions.push_back(i);
    } else {
      int out = n.outputs[0];
      if (!s_.materialized[out]) {
        log(fmt::format("inline {} (%{}) into its consumers: not materialized", n.op, out));
        return;
      }
      grp.shape = g_.buffers[out].sizes;
      grp.stores.push_back(i);
    }
    place_in_kernel(i, std::move(grp));
  }

  /// The strides that view `out` (dense) with `x`'s sizes, where `in` reads
  /// all of `x` (dense) through a permutation of its dims and `out` holds
  /// `in`'s elements in order (a contiguous copy); nullopt for any other read.
  static std::optional<std::vector<int64_t>> permuted_view_strides(const Operand& in,
                                                                   const Buffer& x,
                                                                   const Buffer& out) {
    const size_t rank = x.sizes.size();
    if (in.is_scalar() || in.offset != 0 || in.sizes.size() != rank || out.sizes != in.sizes)
      return std::nullopt;
    const Shape xs = detail::contiguous_strides(x.sizes),
                os = detail::contiguous_strides(out.sizes);
    std::vector<int64_t> strides(rank, 0);
    std::vector<bool> used(rank, false);
    for (size_t i = 0; i < rank; ++i) {
      size_t d = 0;
      while (d < rank &&
             (used[d] || x.sizes[d] != in.sizes[i] || (in.sizes[i] != 1 && xs[d] != in.strides[i])))
        ++d;
      if (d == rank) return std::nullopt;
      used[d] = true;
      strides[d] = os[i];
    }
    return strides;
  }

  /// A fallback op that writes into given memory (detail::find_write_into)
  /// whose one result only a contiguous copy of a permutation of it reads
  /// (attention's [B, H, L, E] result, then y.transpose(1, 2).contiguous()):
  /// the op writes the copy's buffer through the permuted view, and the copy
  /// kernel goes (one read and one write of the result fewer).
  void fold_permuted_copies() {
    for (auto& f : s_.steps) {
      if (f.kind != Step::Kind::Fallback || f.kernel_kind != "fallback") continue;
      const Node& n = g_.nodes[f.node];
      if (n.outputs.size() != 1 || !detail::find_write_into(n.op)) continue;
      const int x = n.outputs[0];
      const int c = single_user(x);
      if (c < 0 || g_.nodes[c].op != "clone" || g_.nodes[c].inputs.size() != 1) continue;
      const int y = g_.nodes[c].outputs[0];
      auto copy = std::find_if(s_.steps.begin(), s_.steps.end(), [&](const Step& st) {
        return st.kind == Step::Kind::Kernel && !st.group.reduction &&
               st.group.stores == std::vector<int>{c};
      });
      if (copy == s_.steps.end()) continue;
      const std::optional<std::vector<int64_t>> strides =
          permuted_view_strides(g_.nodes[c].inputs[0], g_.buffers[x], g_.buffers[y]);
      if (!strides) continue;
      f.out_buffer = y;
      f.out_strides = *strides;
      s_.materialized[x] = false;
      log(
          fmt::format("{} (%{}) writes %{} through a permuted view: the copy (clone) of its "
                      "transpose goes",
                      n.op, x, y));
      s_.steps.erase(copy);           // after f's position or before it: f is not used again
      return fold_permuted_copies();  // the iterators are stale: look again
    }
  }

  /// A reduction result only its own kernel reads stays in a register.
  void drop_private_reduction_stores() {
    bool reductions = false;
    for (auto& st : s_.steps) reductions |= !st.group.reductions.empty();
    if (!reductions) return;
    std::vector<bool> read_elsewhere(g_.buffers.size(), false);
    for (auto& st : s_.steps) {
      if (st.kind == Step::Kind::Kernel) {
        for (int b : footprint(g_, s_.materialized, st.group).reads) read_elsewhere[b] = true;
      } else {
        for (auto& in : g_.nodes[st.node].inputs)
          if (!in.is_scalar()) read_elsewhere[in.buf] = true;
        if (st.cast_prologue) {  // the GEMM reads the converts' sources, not the converts
          const std::array<Operand, 2> src = *gemm_cast_prologue(g_, g_.nodes[st.node]);
          for (const Operand& in : src) read_elsewhere[in.buf] = true;
        }
        for (int e : st.epilogue)
          for (auto& in : g_.nodes[e].inputs)
            if (!in.is_scalar()) read_elsewhere[in.buf] = true;
      }
    }
    for (auto& st : s_.steps) {
      if (st.kind != Step::Kind::Kernel) continue;
      for (int r : st.group.reductions)
        for (int o : g_.nodes[r].outputs)
          if (!escapes_[o] && !read_elsewhere[o]) {
            s_.materialized[o] = false;
            log(fmt::format("keep {} (%{}) in registers: only its own kernel reads it",
                            g_.nodes[r].op, o));
          }
    }
  }

  void finalize_names() {
    if (opts_.fuse) drop_private_reduction_stores();
    int index = 0;
    for (auto& st : s_.steps) {
      if (st.kind == Step::Kind::Fallback) {
        if (st.kernel_kind == "for") {
          // "_fused_sgd_" -> cpp_for_fused_sgd_3
          std::string op = g_.nodes[st.node].op;
          while (!op.empty() && op.front() == '_') op.erase(op.begin());
          while (!op.empty() && op.back() == '_') op.pop_back();
          st.name = fmt::format("{}_for_{}_{}", target_name(target_), op, index++);
        }
        st.reads.clear();
        for (auto& in : g_.nodes[st.node].inputs)
          if (!in.is_scalar()) st.reads.push_back(in.buf);
        st.writes =
            st.out_buffer >= 0 ? std::vector<int>{st.out_buffer} : g_.nodes[st.node].outputs;
        continue;
      }
      if (st.kind == Step::Kind::Extern) {
        const Node& n = g_.nodes[st.node];
        std::vector<std::string> ops = {n.op == "matmul" && st.bias >= 0 ? "addmm" : n.op};
        for (size_t e = 1; e < st.epilogue.size(); ++e) ops.push_back(g_.nodes[st.epilogue[e]].op);
        st.name = st.epilogue.empty() ? fmt::format("extern_{}", n.op)
                                      : fmt::format("{}_tem_fused_{}_{}", target_name(target_),
                                                    fmt::join(ops, "_"), index++);
        if (st.cast_prologue) {
          const std::array<Operand, 2> src = *gemm_cast_prologue(g_, n);
          for (const Operand& in : src) st.reads.push_back(in.buf);
        } else {
          for (auto& in : n.inputs)
            if (!in.is_scalar()) st.reads.push_back(in.buf);
        }
        if (st.bias >= 0) st.reads.push_back(g_.nodes[st.epilogue[0]].inputs[st.bias].buf);
        if (st.residual >= 0)
          st.reads.push_back(g_.nodes[st.epilogue.back()].inputs[st.residual].buf);
        st.writes = {extern_output(st)};
        continue;
      }
      GroupFootprint fp = footprint(g_, s_.materialized, st.group);
      st.config = choose_config(g_, st.group, fp, target_, opts_.round_intermediates);
      std::vector<std::string> ops = fp.ops;
      if (ops.size() > 6) ops.resize(6);
      std::string kind;
      if (st.group.reduction) {
        // Scans take the looped reduction's prefix, as Inductor names them.
        kind = st.config.persistent ? "per" : "red";
      } else {
        // Horizontal: several outputs none of which reads another.
        bool independent = st.group.stores.size() > 1;
        for (bool r : fp.reads_other_store) independent &= !r;
        kind = independent ? "for" : "poi";
      }
      st.kernel_kind = kind;
      st.name = fmt::format("{}_{}_fused_{}_{}", target_name(target_), kind, fmt::join(ops, "_"),
                            index++);
      st.reads = fp.reads;
      st.writes.clear();
      for (int r : st.group.reductions)
        for (int o : g_.nodes[r].outputs)
          if (s_.materialized[o]) st.writes.push_back(o);
      for (int n : st.group.stores) st.writes.push_back(g_.nodes[n].outputs[0]);
    }
  }

  const Graph& g_;
  FusionOptions opts_;
  Target target_;
  Schedule s_;
  std::map<int, int> writer_step_;  // buffer -> step that writes it
  std::vector<std::vector<int>> users_;
  std::vector<bool> escapes_;
  std::vector<bool> absorbed_;
  std::set<int> prologue_sources_;  // buffers GEMM cast prologues read (materialized)
  std::set<int> unused_converts_;   // convert outputs only cast prologues read (not computed)
  std::map<int, Step> extern_steps_;
  std::vector<int64_t> ops_;       // per node: ops a kernel computes for it (count_ops)
  std::vector<int64_t> step_ops_;  // per step: ops its kernel computes (0 for non-kernels)
  std::set<int> open_, full_;      // kernel steps that take more members, and those that do not
  std::vector<uint64_t> visit_;    // per node: the walk (stamp_) that last visited it
  uint64_t stamp_ = 0;
};

}  // namespace

Schedule schedule(const Graph& g, const FusionOptions& opts, Target target) {
  Scheduler s(g, opts, target);
  return s.run();
}

}  // namespace smelt::compiler
