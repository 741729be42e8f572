// What the pointwise op files share (internal to src/ops/pointwise*.cpp): one
// launch() that validates, records or runs a pointwise op through the backend
// of its tensors' device, by the functor the op table names for it.
#pragma once
#include <vector>

#include "ops/pointwise.h"

namespace smelt::detail::pw {

/// Raises the ZeroDivisionError PyTorch raises for integer division by zero
/// (called by the eager kernel before it writes anything). It reads the
/// divisor's values on the host; a GPU backend checks a divisor in its own
/// memory in the kernel instead (Backend::pointwise_checked_divisor), raising
/// the same message at the next synchronization, so that an integer div
/// (with a rounding mode), remainder or fmod does not wait for the device.
void check_int_divisor(const char* op, const Tensor& divisor, DType dtype);
/// The message of that error.
std::string int_divisor_message(const char* op, const Tensor& divisor);

struct Launch {
  const char* op;      // user-facing name for errors
  const char* record;  // op-table name recorded in the graph
  DType dtype;         // compute dtype ("dtype" attr)
  DType out_dtype;
  Attrs attrs;
  bool int_zero_check = false;  // check inputs[1] for integer zero divisors
};

/// Validates, records/runs one pointwise op over `inputs` (original dtypes):
/// the element function is pointwise_call(l.record, attrs), run by the
/// device's backend. Error naming l.op when the backend has no kernel for the
/// compute dtype.
Tensor launch(const Launch& l, const std::vector<Tensor>& inputs);

}  // namespace smelt::detail::pw
