// C++ numbers entering tensor ops (see numbers.h): PyTorch's conversion of a
// Python number to an op's dtype, with c10::overflows' rules for the checked form.
#include "ops/numbers.h"

#include <cfloat>
#include <cmath>
#include <cstring>

#include "core/dtype_dispatch.h"
#include "kernels/scalar_ops.h"
#include "ops/op_table.h"
#include "ops/pointwise.h"

namespace smelt::detail {

std::pair<double, double> dtype_range(DType t) {
  switch (t) {
    case DType::Bool:
      return {0.0, 1.0};
    case DType::UInt8:
      return {0.0, 255.0};
    case DType::Int8:
      return {-128.0, 127.0};
    case DType::Int16:
      return {-32768.0, 32767.0};
    case DType::Int32:
      return {-2147483648.0, 2147483647.0};
    case DType::Int64:
      return {-9223372036854775808.0, 9223372036854775807.0};
    case DType::Float16:
      return {-65504.0, 65504.0};
    case DType::BFloat16: {
      const double m = static_cast<float>(BFloat16::from_bits(0x7f7f));
      return {-m, m};
    }
    case DType::Float32:
      return {-static_cast<double>(FLT_MAX), static_cast<double>(FLT_MAX)};
    default:
      return {-DBL_MAX, DBL_MAX};
  }
}

bool number_overflows(const Scalar& s, DType t) {
  if (t == DType::Bool || s.is_bool()) return false;
  const auto [lo, hi] = dtype_range(t);
  if (s.is_floating()) {
    const double d = s.to_double();
    if (std::isnan(d) || std::isinf(d)) return !is_floating(t);
    return d < lo || d > hi;
  }
  const int64_t v = s.to_int();
  // c10::overflows lets a negative integer wrap into an unsigned dtype when its
  // magnitude fits (uint8: -2 -> 254).
  if (t == DType::UInt8) return v > 255 || (v < 0 && 0 - static_cast<uint64_t>(v) > 255u);
  if (t == DType::Int64) return false;
  return static_cast<double>(v) < lo || static_cast<double>(v) > hi;
}

Scalar number_to_dtype(const Scalar& s, DType t) {
  return SMELT_DISPATCH_ALL(t, "number_to_dtype", [&] {
    T v = s.is_floating() ? scalar::cast<T>(s.to_double())
          : s.is_bool()   ? scalar::cast<T>(s.to_int() != 0)
                          : scalar::cast<T>(s.to_int());
    return Scalar(v);
  });
}

Scalar checked_number_to_dtype(const Scalar& s, DType t, const char* op) {
  SMELT_CHECK(!number_overflows(s, t),
              "{}: value {} cannot be converted to type {} without overflow (as in PyTorch); "
              "pass a number within the range of {}, or convert the tensor to a wider dtype first",
              op, s.str(), dtype_name(t), dtype_name(t));
  return number_to_dtype(s, t);
}

std::vector<Tensor> convert_numbers(const char* op, const char* record, DType dtype,
                                    const std::vector<Tensor>& inputs) {
  const OpDef* def = find_op(record);
  SMELT_INTERNAL_ASSERT(def && def->kind == OpKind::Pointwise,
                        "convert_numbers: '{}' is not a "
                        "pointwise op",
                        record);
  const NumberRule rule = def->numbers;
  std::vector<Tensor> out = inputs;
  for (size_t k = 0; k < out.size(); ++k) {
    const Tensor& t = out[k];
    if (!t.defined() || !t.is_wrapped_number() || t.is_tracer()) continue;
    if (rule == NumberRule::Opmath) continue;  // the kernel reads it unrounded
    const bool checked = k > 0 && (rule == NumberRule::Checked ||
                                   (rule == NumberRule::CheckedIfIntegral && !is_floating(dtype)));
    const Scalar v = t.item();
    const Scalar r = checked ? checked_number_to_dtype(v, dtype, op) : number_to_dtype(v, dtype);
    // A number the rounding leaves as it is (clamp(x, -1, 1) in float32)
    // keeps its tensor: two fewer allocations per operand and call.
    const double rd = r.to_double(), vd = v.to_double();
    const bool same =
        r.dtype() == v.dtype() &&
        (r.is_floating() ? std::memcmp(&rd, &vd, sizeof(double)) == 0 : r.to_int() == v.to_int());
    if (!same) out[k] = wrap_scalar(r);
  }
  return out;
}

}  // namespace smelt::detail
