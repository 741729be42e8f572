// TEMPORARY: weak definitions of subcommands still being written.
#include <cstdio>

#include "commands.h"

namespace smelt::cli {
static int pending(const char* c) {
  std::fprintf(stderr, "smelt %s: not implemented yet\n", c);
  return 1;
}
__attribute__((weak)) int cmd_ops() { return pending("ops"); }
__attribute__((weak)) int cmd_golden(const GoldenOptions&) { return pending("golden"); }
__attribute__((weak)) int cmd_demo(const std::string&) { return pending("demo"); }
__attribute__((weak)) int cmd_bench(const BenchOptions&) { return pending("bench"); }
__attribute__((weak)) int cmd_fuzz(const FuzzOptions&) { return pending("fuzz"); }
}  // namespace smelt::cli
