#include "ops/dispatch.h"

#include <fmt/format.h>

#include "ops/op_table.h"
#include "smelt/autograd.h"

namespace smelt::detail {

namespace {
thread_local TraceContext* g_trace = nullptr;

std::string attr_str(const AttrValue& v) {
  return std::visit(
      [](const auto& x) -> std::string {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, bool>)
          return x ? "true" : "false";
        else if constexpr (std::is_same_v<T, int64_t>)
          return std::to_string(x);
        else if constexpr (std::is_same_v<T, double>)
          return fmt::format("{}", x);
        else if constexpr (std::is_same_v<T, std::string>)
          return "\"" + x + "\"";
        else if constexpr (std::is_same_v<T, std::vector<int64_t>>)
          return fmt::format("[{}]", fmt::join(x, ", "));
        else if constexpr (std::is_same_v<T, DType>)
          return std::string(dtype_name(x));
        else
          return x.str();
      },
      v);
}
}  // namespace

void Attrs::set(const std::string& k, AttrValue v) {
  for (auto& [name, val] : items)
    if (name == k) {
      val = std::move(v);
      return;
    }
  items.emplace_back(k, std::move(v));
}
bool Attrs::has(const std::string& k) const {
  for (auto& [name, val] : items)
    if (name == k) return true;
  return false;
}
const AttrValue& Attrs::get(const std::string& k) const {
  for (auto& [name, val] : items)
    if (name == k) return val;
  SMELT_INTERNAL_ASSERT(false, "attribute '{}' missing (have: {})", k, str());
}
std::string Attrs::str() const {
  std::string s;
  for (auto& [name, val] : items) {
    if (!s.empty()) s += ", ";
    s += name + "=" + attr_str(val);
  }
  return s;
}

namespace {
GradRecorder* g_grad_recorder = nullptr;
}  // namespace

GradRecorder* grad_recorder() { return g_grad_recorder; }
void set_grad_recorder(GradRecorder* r) { g_grad_recorder = r; }

bool grad_needed(const Tensor& t) {
  return t.defined() && impl_requires_grad(t.impl()) && GradMode::is_enabled();
}

bool grad_needed(const std::vector<Tensor>& inputs) {
  bool any = false;
  for (auto& t : inputs) any |= t.defined() && impl_requires_grad(t.impl());
  return any && GradMode::is_enabled();
}

std::vector<Tensor> run_differentiable(const std::string& op, const std::vector<Tensor>& inputs,
                                       const Attrs& attrs,
                                       const FunctionRef<std::vector<Tensor>()>& compute) {
  if (!grad_needed(inputs)) return compute();
  std::vector<Tensor> outs;
  {
    NoGradGuard no_grad;
    outs = compute();
  }
  // An output that is an input itself (a no-op case) becomes a view of it, so
  // that recording gives the output a history without touching the input's.
  for (auto& o : outs)
    for (const auto& in : inputs)
      if (o.defined() && o.is_same(in))
        o = make_view(o, o.sizes(), o.strides(), o.storage_offset());
  grad_recorder()->record(op, inputs, attrs, outs);
  return outs;
}

TraceContext* trace_context() { return g_trace; }
TraceContext* set_trace_context(TraceContext* ctx) {
  TraceContext* prev = g_trace;
  g_trace = ctx;
  return prev;
}

bool any_tracer(const std::vector<Tensor>& ts) {
  for (auto& t : ts)
    if (is_tracer(t)) return true;
  return false;
}

static TraceContext& require_trace(const std::string& op) {
  TraceContext* ctx = trace_context();
  SMELT_CHECK(ctx != nullptr,
              "{}: a tensor from a finished smelt::compile trace was used outside it; "
              "do not keep tensors created inside a compiled function",
              op);
  return *ctx;
}

namespace {
/// PyTorch's same-device rule: every input is on the outputs' device, except
/// wrapped numbers, and 0-dim CPU tensors in ops whose kernels read them as
/// values (pointwise ops, masked_fill, index_put's values); index_put's
/// indices are read on the host wherever they are.
void check_devices(const std::string& op, const std::vector<Tensor>& inputs, Device dev) {
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& t = inputs[i];
    if (!t.defined() || t.is_wrapped_number() || t.device() == dev) continue;
    if (op == "index_put" && i == 1) continue;
    const OpDef* def = find_op(op);  // only here: every eager op comes through this loop
    const bool cpu_scalars = (def != nullptr && def->kind == OpKind::Pointwise) ||
                             op == "masked_fill" || op == "index_put";
    if (cpu_scalars && t.device().is_cpu() && t.dim() == 0) continue;
    SMELT_CHECK(false,
                "{}: Expected all tensors to be on the same device, but found at least two "
                "devices, {} and {} (input {} of shape {}); move them with .to(device)",
                op, dev.str(), t.device().str(), i, shape_str(t.sizes()));
  }
}

/// run_op over `n` outputs `outs` (run_op1 passes its one without a vector).
std::vector<Tensor> run_op_impl(const std::string& op, const std::vector<Tensor>& inputs,
                                const Attrs& attrs, const OutMeta* outs, size_t n,
                                const Kernel& kernel) {
  if (n > 0) check_devices(op, inputs, outs[0].device);
  TraceContext* ctx = trace_context();
  const bool grad = grad_needed(inputs);
  if (any_tracer(inputs) || (ctx && ctx->captures(inputs))) {
    // Traced: a graph node, and under autograd the backward node eager mode
    // records (a backward pass the function runs is then traced as well).
    std::vector<Tensor> results =
        require_trace(op).record(op, inputs, attrs, std::vector<OutMeta>(outs, outs + n));
    if (grad) grad_recorder()->record(op, inputs, attrs, results);
    return results;
  }
  OpScope scope(op.c_str());  // names the op if an allocation runs out of memory
  std::vector<Tensor> results;
  results.reserve(n);
  for (size_t i = 0; i < n; ++i)
    results.push_back(make_empty(outs[i].sizes, outs[i].dtype, outs[i].device));
  if (!grad) {
    kernel(results);
    return results;
  }
  {
    NoGradGuard no_grad;  // a kernel written over other ops records nothing of its own
    kernel(results);
  }
  grad_recorder()->record(op, inputs, attrs, results);
  return results;
}
}  // namespace

std::vector<Tensor> run_op(const std::string& op, const std::vector<Tensor>& inputs,
                           const Attrs& attrs, const std::vector<OutMeta>& outs,
                           const Kernel& kernel) {
  return run_op_impl(op, inputs, attrs, outs.data(), outs.size(), kernel);
}

Tensor run_op1(const std::string& op, const std::vector<Tensor>& inputs, const Attrs& attrs,
               const OutMeta& out, const Kernel& kernel) {
  return std::move(run_op_impl(op, inputs, attrs, &out, 1, kernel)[0]);
}

void run_copy(const Tensor& dst, const Tensor& src, const std::function<void()>& eager_copy) {
  TraceContext* ctx = trace_context();
  const bool grad = grad_needed(dst) || grad_needed(src);
  const bool traced = is_tracer(dst) || is_tracer(src) || (ctx && ctx->captures({dst, src}));
  if (grad) grad_recorder()->before_write(dst, src);
  if (traced)
    require_trace("copy_").record_copy(dst, src);
  else
    eager_copy();
  dst.storage()->bump_version();
  if (grad) grad_recorder()->after_write(dst, src);
}

void note_random(const std::string& op) {
  if (TraceContext* ctx = trace_context()) ctx->record_random(op);
}

}  // namespace smelt::detail
