#include "ops/decompose.h"

#include "ops/op_table.h"

namespace smelt::detail {

std::vector<Tensor> run_composite(const std::string& op, const std::vector<Tensor>& inputs,
                                  const Attrs& attrs, const std::vector<OutMeta>& outs) {
  const Decomposition* d = find_decomposition(op);
  SMELT_INTERNAL_ASSERT(d != nullptr, "composite op '{}' has no decomposition", op);
  if (any_tracer(inputs) || (trace_context() && trace_context()->captures(inputs))) {
    TraceContext* ctx = trace_context();
    SMELT_CHECK(ctx != nullptr,
                "{}: a tensor from a finished smelt::compile trace was used outside it", op);
    if (grad_needed(inputs))  // raises the graph break run_differentiable raises for tracers
      return run_differentiable(op, inputs, attrs, [&] { return (*d)(inputs, attrs); });
    return ctx->record(op, inputs, attrs, outs);
  }
  // A composite with a derivative of its own records one node; the others are
  // differentiated through the primitive ops of their decomposition.
  const OpDef* def = find_op(op);
  if (def && def->derivative)
    return run_differentiable(op, inputs, attrs, [&] { return (*d)(inputs, attrs); });
  return (*d)(inputs, attrs);
}

}  // namespace smelt::detail
