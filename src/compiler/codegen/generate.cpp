// The code-generation stage (see generate.h).
#include "compiler/codegen/generate.h"

#include <algorithm>

#include "compiler/codegen/kernel_builder.h"
#include "smelt/error.h"

namespace smelt::compiler {

KernelDesc describe_kernel(const Graph& g, const Schedule& s, const Step& st) {
  KernelDesc k = build_kernel(g, s.materialized, st.group, st.config, st.name);
  for (auto [r, w] : st.in_place) {
    auto arg = [&](int buf, bool write) {
      return std::find_if(k.args.begin(), k.args.end(),
                          [&](const KernelArg& a) { return a.buf == buf && a.write == write; });
    };
    const auto in = arg(r, false), out = arg(w, true);
    SMELT_INTERNAL_ASSERT(in != k.args.end() && out != k.args.end(),
                          "kernel {}: in-place pair %{} -> %{} is not among its arguments", st.name,
                          r, w);
    in->written_through = true;
    out->memory_of = in->name;
  }
  return k;
}

void generate_kernel(const Graph& g, const Schedule& s, Step& st, const Dialect& dialect) {
  KernelDesc k = describe_kernel(g, s, st);
  st.source = print_kernel(k, dialect);
  st.error_ops = k.error_ops;
  // Argument order is the kernel's: reads, then writes.
  std::vector<int> reads, writes;
  for (auto& a : k.args) (a.write ? writes : reads).push_back(a.buf);
  SMELT_INTERNAL_ASSERT(
      std::is_permutation(reads.begin(), reads.end(), st.reads.begin(), st.reads.end()) &&
          std::is_permutation(writes.begin(), writes.end(), st.writes.begin(), st.writes.end()),
      "kernel {}: the description's arguments differ from the schedule's", st.name);
  st.reads = std::move(reads);
  st.writes = std::move(writes);
}

void generate_kernels(const Graph& g, Schedule& s, const Dialect& dialect) {
  for (auto& st : s.steps)
    if (st.kind == Step::Kind::Kernel) generate_kernel(g, s, st, dialect);
}

}  // namespace smelt::compiler
