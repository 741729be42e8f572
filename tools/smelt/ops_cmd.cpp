// `smelt ops`: every op of the op table, one line each: kind; for pointwise ops
// arity, dtype rule, the scalar functor both eager and generated code call, the
// runtime check and GEMM-epilogue activation; for reductions (and scans) the accumulator and
// outputs; for all ops whether they are discontinuous, their precision class, how
// a C++ number operand enters a pointwise op (NumberRule) and their derivative
// ("formula": its own, in the op table; "via X": through the ops X its eager
// code records; "none": not differentiable). Attribute variants follow on
// "  attr=value:" lines.
#include <cstdio>
#include <string>

#include <fmt/format.h>

#include "commands.h"
#include "ops/op_call.h"
#include "ops/op_table.h"

namespace smelt::cli {

namespace {
const char* rule_name(detail::DTypeRule r) {
  switch (r) {
    case detail::DTypeRule::None:
      return "";
    case detail::DTypeRule::Same:
      return "same";
    case detail::DTypeRule::IntToFloat:
      return "int->float";
    case detail::DTypeRule::Compare:
      return "->bool";
    case detail::DTypeRule::Logical:
      return "logical";
    case detail::DTypeRule::IntegralOnly:
      return "integral only";
  }
  return "?";
}

std::string derivative_desc(const detail::OpDef& op) {
  if (!op.differentiable) return "none";
  if (op.derivative) return "formula";
  if (!op.derivative_via.empty()) return fmt::format("via {}", op.derivative_via);
  return "MISSING";
}
}  // namespace

int cmd_ops() {
  const auto& table = detail::op_table();
  size_t w = 2;
  for (const auto& op : table) w = std::max(w, op.name.size());
  auto row = [w](std::string_view name, std::string_view kind, std::string_view arity,
                 std::string_view rule, std::string_view functor, std::string_view check,
                 std::string_view epilogue, std::string_view acc, std::string_view jumps,
                 std::string_view precision, std::string_view numbers, std::string_view diff) {
    std::string line = fmt::format(
        "{:<{}}  {:<10}  {:<5}  {:<13}  {:<12}  {:<15}  {:<9}  {:<19}  {:<5}  {:<14}  {:<19}  {}",
        name, w, kind, arity, rule, functor, check, epilogue, acc, jumps, precision, numbers, diff);
    while (!line.empty() && line.back() == ' ') line.pop_back();
    std::printf("%s\n", line.c_str());
  };
  row("op", "kind", "arity", "dtype rule", "functor", "runtime check", "epilogue",
      "accumulator/outputs", "disc.", "precision", "numbers", "derivative");
  for (const auto& op : table) {
    std::string acc;
    if (op.accumulator != detail::Accumulator::None)
      acc = fmt::format("{}{}({})", op.scan ? "scan " : "",
                        detail::accumulator_name(op.accumulator), fmt::join(op.finals, ","));
    row(op.name, detail::op_kind_name(op.kind), op.arity > 0 ? std::to_string(op.arity) : "",
        rule_name(op.rule), op.functor, detail::runtime_check_name(op.check),
        epilogue_activation_name(op.epilogue), acc, op.discontinuous ? "yes" : "",
        detail::precision_name(op.precision),
        op.kind == detail::OpKind::Pointwise ? detail::number_rule_name(op.numbers) : "",
        derivative_desc(op));
    for (const auto& v : op.variants)
      row(fmt::format("  {}={}", v.attr, v.value), "", "", "", v.functor,
          detail::runtime_check_name(v.check), epilogue_activation_name(v.epilogue), "",
          v.discontinuous ? "yes" : "", "", "", "");
  }
  std::printf("%zu ops\n", table.size());
  return 0;
}

}  // namespace smelt::cli
