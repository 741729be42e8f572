#include "ops/decompose.h"

namespace smelt::detail {

std::vector<Tensor> run_composite(const std::string& op, const std::vector<Tensor>& inputs,
                                  const Attrs& attrs, const std::vector<OutMeta>& outs) {
  const Decomposition* d = find_decomposition(op);
  SMELT_INTERNAL_ASSERT(d != nullptr, "composite op '{}' has no decomposition", op);
  if (any_tracer(inputs) || (trace_context() && trace_context()->captures(inputs))) {
    TraceContext* ctx = trace_context();
    SMELT_CHECK(ctx != nullptr,
                "{}: a tensor from a finished smelt::compile trace was used outside it", op);
    return ctx->record(op, inputs, attrs, outs);
  }
  return (*d)(inputs, attrs);
}

}  // namespace smelt::detail
