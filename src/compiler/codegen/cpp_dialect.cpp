// The C++ dialect of the kernel printer: extern "C" entry points over one
// argument array, OpenMP loops, per-thread partials for split rows, and the
// embedded scalar functors with their math functions (kernels/vector_math.h:
// SLEEF's, vectorizable and bitwise the eager kernels'). See printer.h.
#include <fmt/format.h>

#include <map>
#include <sstream>

#include "backend/toolchain_files.h"
#include "compiler/codegen/printer.h"
#include "kernels/embedded_source.h"
#include "smelt/error.h"

namespace smelt::compiler {

std::string CppDialect::preamble() const {
  // The math functions' definitions (vector_math_impl.h) are not here: the
  // toolchain links them, compiled once (backend/cpu/toolchain.cpp).
  static const std::string prelude =
      "// smelt JIT translation unit\n" + std::string(backend::kNoSpecialMathFunctions) +
      "#include <cmath>\n#include <cstdint>\n#include "
      "<limits>\n#include <type_traits>\n#include <vector>\n#include <omp.h>\n"
      "// No pairs of Welford chunks (reduce_ops.h: the same bits, less to compile).\n"
      "#define SMELT_REDUCE_CHUNK_PAIRS 0\n" +
      kernels::embedded_source(
          {"half.h", "vector_math.h", "scalar_ops.h", "reduce_ops.h", "reduce_jit.h"}, true) +
      backend::kPreambleEnd;
  return prelude;
}

void CppDialect::kernel_begin(const KernelDesc& k, CodeBuffer& out) const {
  out.line(fmt::format("extern \"C\" void {}(void* const* args) {{", k.name));
  out.indent();
  for (size_t a = 0; a < k.args.size(); ++a) {
    const KernelArg& arg = k.args[a];
    if (!arg.memory_of.empty()) continue;  // below
    const char* c = const_of(arg);
    out.line(fmt::format("{}{}* __restrict__ {} = static_cast<{}{}*>(args[{}]);", c,
                         storage_type(arg.dtype), arg.name, c, storage_type(arg.dtype), a));
  }
  for (const KernelArg& arg : k.args)
    if (!arg.memory_of.empty())
      out.line(fmt::format("{0}* const {1} = reinterpret_cast<{0}*>({2});  // in place",
                           storage_type(arg.dtype), arg.name, arg.memory_of));
  if (!k.error_ops.empty())
    out.line(fmt::format("int* smelt_error = static_cast<int*>(args[{}]);", k.args.size()));
}

void CppDialect::range_begin(const Range& r, const KernelConfig& c, CodeBuffer& out) const {
  std::string head = fmt::format("for ({0} {1} = 0; {1} < {2}; ++{1}) {{", index_type(c.index_bits),
                                 r.var, r.extent.str());
  switch (r.tag) {
    case RangeTag::Serial:
    case RangeTag::Vector:
      out.line(head);
      return;
    case RangeTag::Parallel:
      out.line("#pragma omp parallel for schedule(static)\n" + head);
      return;
    case RangeTag::Thread:  // inside a parallel region (a split row)
      out.line("#pragma omp for schedule(static)\n" + head);
      return;
    case RangeTag::Block:
      break;
  }
  SMELT_INTERNAL_ASSERT(false, "the C++ dialect has no {} ranges", range_tag_name(r.tag));
}

void CppDialect::split_reduce(const Stmt& s, const std::string& acc_type, const std::string& loop,
                              const KernelConfig&, CodeBuffer& out) const {
  // Eager's stretches (reduce::row_splits of the same geometry and thread
  // count: bitwise eager), each folded in the row's order, combined in order.
  const bool column = s.order == AccOrder::Column;
  const std::string n = s.name, rn = fmt::format("INT64_C({})", s.extent);
  out.line(
      fmt::format("const int64_t {0}_splits = smelt::reduce::row_splits(INT64_C({1}), {2}, "
                  "omp_get_max_threads());",
                  n, s.rows, rn));
  out.line(fmt::format("std::vector<decltype({0})> {0}_part({0}_splits, {0});", n));
  // The whole team, as every region (loops.h's parallel_for says why); the
  // threads past the last stretch stay idle.
  out.line("#pragma omp parallel for schedule(static)");
  out.line(fmt::format("for (int64_t {0}_c = 0; {0}_c < {0}_splits; ++{0}_c) {{", n));
  out.indent();
  out.line(fmt::format(
      "const int64_t r_begin = smelt::reduce::stretch_begin({0}_c, {0}_splits, {1});", n, rn));
  out.line(fmt::format(
      "const int64_t r_end = smelt::reduce::stretch_begin({0}_c + 1, {0}_splits, {1});", n, rn));
  out.line(fmt::format("smelt::reduce::{}Order<{}> {}(r_begin);", column ? "Column" : "Inner",
                       acc_type, s.partial));
  std::istringstream in(loop);
  for (std::string l; std::getline(in, l);) out.line(l);
  out.line(fmt::format("{0}_part[{0}_c] = {1};", n, order_result(s.partial, "")));
  out.dedent();
  out.line("}");
  out.line(fmt::format("{0} = {0}_part[0];", n));
  out.line(
      fmt::format("for (int64_t {0}_c = 1; {0}_c < {0}_splits; ++{0}_c) {0} = {1}::combine({0}, "
                  "{0}_part[{0}_c]);",
                  n, acc_type));
}

std::string CppDialect::contiguous_stretch(const std::string& order, const std::string& r0,
                                           const std::string& r1, int64_t run,
                                           const std::string& pointer) const {
  // reduce_jit.h: out of line (in the toolchain's math object) for the common
  // accumulators, so that the unit does not compile the fold again.
  return fmt::format("smelt::reduce::jit_stretch({}, {}, {}, INT64_C({}), {});", order, r0, r1, run,
                     pointer);
}

std::string CppDialect::order_result(const std::string& partial, const std::string& lane) const {
  // reduce_jit.h: InnerOrder's result() out of line for the common
  // accumulators (its cascade is most of a small reduction kernel's g++ time).
  if (lane.empty()) return fmt::format("smelt::reduce::jit_result({})", partial);
  return Dialect::order_result(partial, lane);
}

std::string CppDialect::set_error_flag(int code) const {
  return fmt::format("__atomic_store_n(smelt_error, {}, __ATOMIC_RELAXED);", code);
}

}  // namespace smelt::compiler
