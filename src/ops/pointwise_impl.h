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

/// In-place methods (Tensor::add_ and kin, tensor_methods.cpp): while one is
/// alive, the next launch() on this thread (which takes the target, used or
/// not) writes its result straight into `self` instead of a new tensor, when
/// that is what the usual "compute, then self.copy_(result)" would produce:
/// eager (nothing traced), no gradient needed, self contiguous with the
/// result's shape, dtype and device, and every input either apart from self's
/// memory or exactly self's view. One kernel instead of two (and no
/// temporary); self's version is bumped as copy_ bumps it. Otherwise the
/// launch allocates as usual and the method copies.
class InplaceTarget {
 public:
  explicit InplaceTarget(const Tensor& self);
  ~InplaceTarget();
  InplaceTarget(const InplaceTarget&) = delete;
  InplaceTarget& operator=(const InplaceTarget&) = delete;

  const Tensor& self() const { return self_; }
  /// True once a launch wrote its result into self.
  bool used() const { return used_; }
  void mark_used() { used_ = true; }

 private:
  const Tensor& self_;
  bool used_ = false;
  InplaceTarget* prev_;
};

/// Validates, records/runs one pointwise op over `inputs` (original dtypes):
/// the element function is pointwise_call(l.record, attrs), run by the
/// device's backend. Error naming l.op when the backend has no kernel for the
/// compute dtype.
Tensor launch(const Launch& l, const std::vector<Tensor>& inputs);

}  // namespace smelt::detail::pw
