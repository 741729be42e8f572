#include "compiler/codegen/printer.h"

#include <fmt/format.h>

#include <cmath>

namespace smelt::compiler {

std::string Dialect::storage_type(DType t) const {
  switch (t) {
    case DType::Float16:
      return "smelt::Half";
    case DType::BFloat16:
      return "smelt::BFloat16";
    default:
      return std::string(dtype_ctype(t));
  }
}

std::string Dialect::value_type(DType t) const {
  return (t == DType::Float16 || t == DType::BFloat16) ? "float" : storage_type(t);
}

std::string Dialect::literal(const Scalar& s, DType t) const {
  std::string ty = value_type(t);
  if (t == DType::Bool) return s.to_double() != 0 ? "true" : "false";
  if (!is_floating(t)) {
    if (s.is_floating())
      return fmt::format("static_cast<{}>({})", ty, static_cast<int64_t>(s.to_double()));
    return fmt::format("static_cast<{}>(INT64_C({}))", ty, s.to_int());
  }
  double v = s.to_double();
  if (std::isnan(v)) return fmt::format("std::numeric_limits<{}>::quiet_NaN()", ty);
  if (std::isinf(v))
    return fmt::format("{}std::numeric_limits<{}>::infinity()", v < 0 ? "-" : "", ty);
  if (s.is_floating()) return fmt::format("static_cast<{}>({:.17g})", ty, v);
  return fmt::format("static_cast<{}>(INT64_C({}))", ty, s.to_int());
}

std::string CppDialect::preamble() const {
  return "#include <cmath>\n#include <cstdint>\n#include <limits>\n"
         "#include \"smelt/half.h\"\n#include \"scalar_ops.h\"\n#include \"reduce_ops.h\"\n";
}

std::string CppDialect::kernel_signature(const std::string& name) const {
  return fmt::format("extern \"C\" void {}(void* const* args)", name);
}

std::string CppDialect::parallel_for(const std::string& var, const std::string& extent,
                                     bool parallel) const {
  std::string head = fmt::format("for (int64_t {0} = 0; {0} < {1}; ++{0})", var, extent);
  if (!parallel) return head;
  return "#pragma omp parallel for schedule(static)\n" + head;
}

void CodeBuffer::line(const std::string& s) {
  size_t start = 0;
  while (start <= s.size()) {
    size_t end = s.find('\n', start);
    std::string piece = s.substr(start, end == std::string::npos ? std::string::npos : end - start);
    bool pragma = piece.rfind("#pragma", 0) == 0;
    out_ += std::string(pragma ? 0 : depth_ * 2, ' ') + piece + "\n";
    if (end == std::string::npos) break;
    start = end + 1;
  }
}

}  // namespace smelt::compiler
