#include "compiler/codegen/printer.h"

#include <fmt/format.h>

#include "smelt/error.h"

#include <cmath>
#include <map>
#include <sstream>

namespace smelt::detail {
const std::map<std::string, std::string>& embedded_headers();
}

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

/// glibc's vector math library (libmvec) has SIMD variants of these libm
/// functions (<= 4 ulp, IEEE special cases kept). Declaring them `simd` lets
/// the compiler vectorize the loops of the scalar functors that call them
/// (glibc only declares them so under -ffast-math, which would break NaN and
/// signed-zero semantics). Built with -fno-math-errno and linked with -lmvec.
static std::string vector_math_declarations() {
  std::string out = "extern \"C\" {\n";
  for (const char* f :
       {"exp", "exp2", "expm1", "log", "log2", "log1p", "sin", "cos", "tan", "tanh", "erf"}) {
    out += fmt::format("__attribute__((simd(\"notinbranch\"))) double {}(double) noexcept;\n", f);
    out += fmt::format("__attribute__((simd(\"notinbranch\"))) float {}f(float) noexcept;\n", f);
  }
  return out + "}\n";
}

std::string CppDialect::preamble() const {
  static const std::string prelude = [] {
    const auto& h = detail::embedded_headers();
    std::string out =
        "// smelt JIT translation unit\n#include <cmath>\n#include <cstdint>\n#include "
        "<limits>\n#include <type_traits>\n#include <vector>\n#include <omp.h>\n" +
        vector_math_declarations();
    for (const char* name : {"half.h", "scalar_ops.h", "reduce_ops.h"}) {
      auto it = h.find(name);
      SMELT_INTERNAL_ASSERT(it != h.end(), "embedded header {} missing", name);
      std::istringstream in(it->second);
      std::string line;
      out += fmt::format("// ---- {} (embedded) ----\n", name);
      while (std::getline(in, line)) {
        if (line.rfind("#include \"", 0) == 0 || line.rfind("#pragma once", 0) == 0) continue;
        out += line + "\n";
      }
    }
    return out;
  }();
  return prelude;
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
