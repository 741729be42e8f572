#include "ops/decompose.h"

#include "ops/op_table.h"

namespace smelt::detail {

std::vector<Tensor> run_composite(const std::string& op, const std::vector<Tensor>& inputs,
                                  const Attrs& attrs, const std::vector<OutMeta>& outs) {
  const Decomposition* d = find_decomposition(op);
  SMELT_INTERNAL_ASSERT(d != nullptr, "composite op '{}' has no decomposition", op);
  TraceContext* ctx = trace_context();
  const bool traced = any_tracer(inputs) || (ctx && ctx->captures(inputs));
  SMELT_CHECK(!traced || ctx != nullptr,
              "{}: a tensor from a finished smelt::compile trace was used outside it", op);
  // Traced: one node of `op` (the decompose pass expands it later); eager: the
  // decomposition computes it.
  auto compute = [&] {
    return traced ? ctx->record(op, inputs, attrs, outs) : (*d)(inputs, attrs);
  };
  // Under autograd, a composite with a derivative of its own records one
  // backward node; the others are differentiated through the primitive ops of
  // their decomposition (recorded as such while tracing too).
  const OpDef* def = find_op(op);
  if (def && def->derivative) return run_differentiable(op, inputs, attrs, compute);
  if (grad_needed(inputs)) return (*d)(inputs, attrs);
  return compute();
}

}  // namespace smelt::detail
