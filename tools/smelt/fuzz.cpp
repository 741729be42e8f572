// `smelt fuzz --cases N --seed S [--grad] [-v] [--device cuda]`: differential
// fuzzing, compiled vs eager, or eager on a GPU vs eager on the CPU (the
// generator and checker live in tests/fuzz/, library smelt_fuzz), of forward
// programs or, with --grad, of programs that also run backward() (inside the
// compiled function, or on its results through their compiled backward graph);
// a progress line on stderr when it is a terminal.
#include <cstdio>

#include <fmt/format.h>

#include "commands.h"
#include "fuzz/fuzz.h"
#include "progress.h"

namespace smelt::cli {

int cmd_fuzz(const FuzzOptions& opts) {
  fuzz::FuzzOptions o;
  o.cases = opts.cases;
  o.seed = opts.seed;
  o.verbose = opts.verbose;
  o.device = opts.device;
  o.grad = opts.grad;
  Progress progress(opts.device.empty() ? "smelt fuzz" : "smelt fuzz --device " + opts.device,
                    opts.cases);
  o.on_case = [&progress](const fuzz::FuzzSummary& s) { progress.update(s.cases, s.mismatches); };
  o.before_log = [&progress] { progress.clear(); };
  fuzz::FuzzSummary s = fuzz::run(o, stdout);
  progress.clear();
  std::printf("%d cases, %d mismatches", s.cases, s.mismatches);
  if (s.graph_breaks) std::printf(" (%d cases ran eagerly after a graph break)", s.graph_breaks);
  if (opts.grad)
    std::printf("; %d cases compared the inputs' gradients, compiled backward vs eager",
                s.grad_cases);
  std::printf("\n");
  std::vector<std::string> drawn = fuzz::fuzzed_ops(), never;
  for (const auto& op : drawn)
    if (!s.op_counts.count(op)) never.push_back(op);
  std::printf("ops exercised: %zu of the %zu the generator draws from the op table%s%s\n",
              drawn.size() - never.size(), drawn.size(),
              never.empty() ? "" : "; never: ", fmt::format("{}", fmt::join(never, ", ")).c_str());
  return s.mismatches == 0 ? 0 : 1;
}

}  // namespace smelt::cli
