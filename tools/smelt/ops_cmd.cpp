// `smelt ops`: every op of the op table with its kind (and, for pointwise ops,
// arity, dtype rule and the scalar functor both eager and generated code call).
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
}  // namespace

int cmd_ops() {
  const auto& table = detail::op_table();
  size_t w = 2;
  for (const auto& op : table) w = std::max(w, op.name.size());
  std::printf("%s\n", fmt::format("{:<{}}  {:<10}  {:<5}  {:<13}  {}", "op", w, "kind", "arity",
                                  "dtype rule", "functor")
                          .c_str());
  for (const auto& op : table) {
    std::string line =
        fmt::format("{:<{}}  {:<10}  {:<5}  {:<13}  {}", op.name, w, detail::op_kind_name(op.kind),
                    op.arity > 0 ? std::to_string(op.arity) : "", rule_name(op.rule), op.functor);
    while (!line.empty() && line.back() == ' ') line.pop_back();
    std::printf("%s\n", line.c_str());
  }
  std::printf("%zu ops\n", table.size());
  return 0;
}

}  // namespace smelt::cli
