// `smelt fuzz --cases N --seed S [-v]`: differential fuzzing, compiled vs eager
// (the generator and checker live in src/compiler/fuzz/).
#include <cstdio>

#include "commands.h"
#include "compiler/fuzz/fuzz.h"

namespace smelt::cli {

int cmd_fuzz(const FuzzOptions& opts) {
  fuzz::FuzzOptions o;
  o.cases = opts.cases;
  o.seed = opts.seed;
  o.verbose = opts.verbose;
  fuzz::FuzzSummary s = fuzz::run(o, stdout);
  std::printf("%d cases, %d mismatches", s.cases, s.mismatches);
  if (s.graph_breaks) std::printf(" (%d cases ran eagerly after a graph break)", s.graph_breaks);
  std::printf("\n");
  return s.mismatches == 0 ? 0 : 1;
}

}  // namespace smelt::cli
