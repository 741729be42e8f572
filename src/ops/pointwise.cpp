// Pointwise ops, common part: promotion, broadcasting, wrapped numbers, the
// functor mapping shared by the compiler and the eager kernels, and launch().
#include "ops/pointwise.h"

#include <cstring>
#include <limits>
#include <utility>

#include "backend/backend.h"
#include "ops/numbers.h"
#include "ops/op_table.h"
#include "ops/pointwise_impl.h"
#include "smelt/ops.h"

namespace smelt {
namespace detail {

Tensor wrap_scalar(const Scalar& s) {
  Tensor t = make_empty({}, s.dtype(), Device());
  void* p = t.data_ptr();
  if (s.is_bool()) {
    bool v = s.to_int() != 0;
    std::memcpy(p, &v, sizeof v);
  } else if (s.is_integral()) {
    int64_t v = s.to_int();
    std::memcpy(p, &v, sizeof v);
  } else {
    double v = s.to_double();
    std::memcpy(p, &v, sizeof v);
  }
  t.impl()->wrapped_number = true;
  return t;
}

namespace {
struct Slot {
  bool set = false;
  DType t = DType::Bool;
  void add(DType d) {
    t = set ? promote_types(t, d) : d;
    set = true;
  }
};
// c10::combine_categories: the lower-priority result counts only when it is of a
// higher category than `higher`.
Slot combine(Slot higher, Slot lower) {
  if (!higher.set) return lower;
  if (!lower.set) return higher;
  if (is_floating(higher.t)) return higher;
  if (higher.t == DType::Bool || is_floating(lower.t)) {
    Slot s = higher;
    s.add(lower.t);
    return s;
  }
  return higher;
}
}  // namespace

namespace {
DType result_type_of(const Tensor* begin, const Tensor* end) {
  Slot dim, zero, wrapped;
  for (const Tensor* it = begin; it != end; ++it) {
    const Tensor& t = *it;
    if (!t.defined()) continue;
    DType d = t.dtype();
    if (t.is_wrapped_number()) {
      if (is_floating(d)) d = default_dtype();
      wrapped.add(d);
    } else if (t.dim() > 0) {
      dim.add(d);
    } else {
      zero.add(d);
    }
  }
  Slot r = combine(dim, combine(zero, wrapped));
  SMELT_CHECK(r.set, "result_type: no tensor operands given");
  return r.t;
}
}  // namespace

DType result_type(const std::vector<Tensor>& operands) {
  return result_type_of(operands.data(), operands.data() + operands.size());
}

namespace {
DType compute_dtype_of(const std::string& op, const Tensor* begin, const Tensor* end) {
  const OpDef* def = find_op(op);
  SMELT_INTERNAL_ASSERT(def && def->kind == OpKind::Pointwise,
                        "compute_dtype: '{}' is not a "
                        "pointwise op",
                        op);
  if (def->rule == DTypeRule::Logical) return DType::Bool;
  if (op == "where" && begin != end) ++begin;  // the condition does not count
  DType t = result_type_of(begin, end);
  if (def->rule == DTypeRule::IntToFloat && !is_floating(t)) t = default_dtype();
  return t;
}
}  // namespace

DType compute_dtype(const std::string& op, const std::vector<Tensor>& inputs) {
  return compute_dtype_of(op, inputs.data(), inputs.data() + inputs.size());
}
DType compute_dtype(const std::string& op, std::initializer_list<Tensor> inputs) {
  return compute_dtype_of(op, inputs.begin(), inputs.end());
}

DType output_dtype(const std::string& op, DType dtype) {
  const OpDef* def = find_op(op);
  SMELT_INTERNAL_ASSERT(def && def->kind == OpKind::Pointwise,
                        "output_dtype: '{}' is not a "
                        "pointwise op",
                        op);
  if (def->rule == DTypeRule::Compare || def->rule == DTypeRule::Logical) return DType::Bool;
  return dtype;
}

Device common_device(const char* op, const std::vector<Tensor>& tensors) {
  // The device of the first tensor that is not a CPU scalar (wrapped numbers
  // and 0-dim CPU tensors go with tensors of any device, as in PyTorch).
  auto cpu_scalar = [](const Tensor& t) { return t.device().is_cpu() && t.dim() == 0; };
  Device dev;
  bool found = false;
  for (auto& t : tensors) {
    if (!t.defined() || cpu_scalar(t)) continue;
    if (!found) {
      dev = t.device();
      found = true;
    }
    SMELT_CHECK(t.device() == dev,
                "{}: Expected all tensors to be on the same device, but found at least two "
                "devices, {} and {}; move them with .to(device) (a 0-dim CPU tensor may go with "
                "tensors of any device)",
                op, dev.str(), t.device().str());
  }
  return dev;
}

Shape broadcast_all(const std::vector<Tensor>& tensors, const char* op) {
  Shape s;
  bool first = true;
  for (auto& t : tensors) {
    if (!t.defined()) continue;
    if (first) {
      s = t.sizes();
    } else if (t.sizes() != s) {  // equal shapes (the common case) need no new shape
      s = broadcast_shapes(s, t.sizes(), op);
    }
    first = false;
  }
  return s;
}

PointwiseCall pointwise_call(const std::string& op, const Attrs& attrs,
                             bool single_second_operand) {
  const OpDef* def = find_op(op);
  SMELT_INTERNAL_ASSERT(def && def->kind == OpKind::Pointwise && !def->functor.empty(),
                        "pointwise_call: '{}' is not a pointwise op", op);
  auto is_one = [](const Scalar& s) { return s.to_double() == 1.0; };
  if (op == "add" || op == "sub") {
    if (!attrs.has("alpha") || is_one(attrs.as<Scalar>("alpha"))) return {op, {}};
    // PyTorch converts alpha to the op's dtype (alpha.to<scalar_t>()): a
    // float16 / bfloat16 add multiplies by float16(0.1), not by 0.1. The
    // recorded attr keeps the number itself (autograd multiplies by it).
    const Scalar alpha = attrs.as<Scalar>("alpha");
    const DType dt = attrs.has("dtype") ? attrs.as<DType>("dtype") : DType::Float32;
    const bool half = dt == DType::Float16 || dt == DType::BFloat16;
    return {op + "_alpha", {half ? number_to_dtype(alpha, dt) : alpha}};
  }
  if (op == "nan_to_num") {
    return {"nan_to_num",
            {Scalar(attrs.as<double>("nan")), Scalar(attrs.as<double>("posinf")),
             Scalar(attrs.as<double>("neginf"))}};
  }
  // attribute variants (gelu approximate, div rounding_mode) come from the op table
  std::string functor(op_functor(*def, attrs));
  if ((functor == "div_trunc" || functor == "div_floor") && !single_second_operand &&
      attrs.has("dtype")) {
    // float16 / bfloat16 by a tensor divisor: rounded as PyTorch rounds it.
    const DType dt = attrs.as<DType>("dtype");
    if (dt == DType::Float16 || dt == DType::BFloat16) functor += "_" + std::string(dtype_name(dt));
  }
  return {functor, {}};
}

bool single_divisor(const Shape& sizes, const Shape& strides, DType dtype, DType common) {
  if (shape_numel(sizes) == 1) return true;
  if (dtype != common) return false;
  for (size_t d = 0; d < sizes.size(); ++d)
    if (sizes[d] != 1 && strides[d] != 0) return false;
  return true;
}

}  // namespace detail

DType result_type(const Tensor& a, const Tensor& b) { return detail::result_type({a, b}); }

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  const size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    // i counts from the end
    int64_t da = i < a.size() ? a[a.size() - 1 - i] : 1;
    int64_t db = i < b.size() ? b[b.size() - 1 - i] : 1;
    SMELT_CHECK(da == db || da == 1 || db == 1,
                "{}: the size of tensor a ({}) must match the size of tensor b ({}) at "
                "non-singleton dimension {} (shapes {} and {}); make the sizes equal or 1 to "
                "broadcast",
                op, da, db, n - 1 - i, detail::shape_str(a), detail::shape_str(b));
    out[n - 1 - i] = da == 1 ? db : da;
  }
  return out;
}

namespace detail::pw {

namespace {
thread_local InplaceTarget* t_inplace_target = nullptr;

/// The in-place target set by an InplaceTarget, cleared: only the first
/// launch under it may write into it.
InplaceTarget* take_inplace_target() {
  InplaceTarget* t = t_inplace_target;
  t_inplace_target = nullptr;
  return t;
}

/// True when writing the result of a launch over `inputs` (of `shape`,
/// `dtype`, on `dev`) into `self` gives what self.copy_(result) gives (see
/// InplaceTarget).
bool writes_into(const Tensor& self, const Shape& shape, DType dtype, Device dev,
                 const std::vector<Tensor>& inputs) {
  if (trace_context() != nullptr || any_tracer(inputs) || is_tracer(self)) return false;
  if (grad_needed(inputs) || grad_needed(self)) return false;
  if (self.sizes() != shape || self.dtype() != dtype || self.device() != dev ||
      !self.is_contiguous() || self.numel() == 0)
    return false;
  for (const Tensor& t : inputs) {
    if (t.is_wrapped_number() || t.storage() != self.storage()) continue;
    if (t.storage_offset() != self.storage_offset() || t.sizes() != self.sizes() ||
        t.strides() != self.strides())
      return false;  // overlapping but not the same elements: compute apart, then copy
  }
  return true;
}
}  // namespace

InplaceTarget::InplaceTarget(const Tensor& self) : self_(self), prev_(t_inplace_target) {
  t_inplace_target = this;
}
InplaceTarget::~InplaceTarget() { t_inplace_target = prev_; }

Tensor launch(const Launch& l, const std::vector<Tensor>& operands) {
  InplaceTarget* target = take_inplace_target();
  bool numbers = false;
  for (auto& t : operands) {
    SMELT_CHECK(t.defined(), "{}: got an undefined tensor", l.op);
    numbers |= t.is_wrapped_number();
  }
  // C++ numbers as the op's NumberRule says PyTorch takes them (rounded to the
  // compute dtype, or checked for overflow), before eager or traced use.
  std::vector<Tensor> converted;
  if (numbers) converted = convert_numbers(l.op, l.record, l.dtype, operands);
  const std::vector<Tensor>& inputs = numbers ? converted : operands;
  Shape shape = broadcast_all(inputs, l.op);
  const Device dev = common_device(l.op, inputs);
  Attrs attrs;
  attrs.items.reserve(l.attrs.items.size() + 1);
  attrs.set("dtype", l.dtype);
  for (auto& [k, v] : l.attrs.items) attrs.set(k, v);
  // (pointwise_call reads single_second_operand only for float16 / bfloat16
  // divisions: the other launches skip the operand's walk.)
  const bool half = l.dtype == DType::Float16 || l.dtype == DType::BFloat16;
  const PointwiseCall call = pointwise_call(
      l.record, attrs,
      half && inputs.size() >= 2 &&
          single_divisor(inputs[1].sizes(), inputs[1].strides(), inputs[1].dtype(), l.dtype));
  backend::Backend& be = backend::backend(dev);
  SMELT_CHECK(be.has_pointwise(call.functor, l.dtype),
              "{}: not implemented for dtype {}; convert the input first", l.op,
              dtype_name(l.dtype));
  auto kernel = [&](const std::vector<Tensor>& outs) {
    if (l.int_zero_check && outs[0].numel() > 0 && !is_floating(l.dtype)) {
      // On the device (no wait) where the divisor is device memory.
      if (!inputs[1].is_cpu() &&
          be.pointwise_checked_divisor(call.functor, call.extra, l.dtype, outs[0], inputs,
                                       int_divisor_message(l.op, inputs[1])))
        return;
      check_int_divisor(l.op, inputs[1], l.dtype);
    }
    be.pointwise(call.functor, call.extra, l.dtype, outs[0], inputs);
  };
  if (target != nullptr && writes_into(target->self(), shape, l.out_dtype, dev, inputs)) {
    const Tensor& self = target->self();
    kernel({self});
    self.storage()->bump_version();
    target->mark_used();
    return self;
  }
  return run_op1(l.record, inputs, attrs, {std::move(shape), l.out_dtype, dev}, kernel);
}

std::string int_divisor_message(const char* op, const Tensor& divisor) {
  return fmt::format(
      "{}: ZeroDivisionError: integer division by zero (divisor of dtype {}, shape {}); use a "
      "floating dtype to get inf/nan instead",
      op, dtype_name(divisor.dtype()), shape_str(divisor.sizes()));
}

void check_int_divisor(const char* op, const Tensor& divisor, DType dtype) {
  if (is_floating(dtype)) return;
  for (int64_t v : to_dtype(divisor, dtype).to_vector<int64_t>())
    if (v == 0) throw_error(int_divisor_message(op, divisor));
}

}  // namespace detail::pw
}  // namespace smelt
