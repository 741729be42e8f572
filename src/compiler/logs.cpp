#include "compiler/logs.h"

#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <set>
#include <sstream>

namespace smelt::compiler {

bool log_enabled(const std::string& artifact) {
  static const std::set<std::string> known = {"graph",  "fusion",       "output_code", "recompiles",
                                              "guards", "graph_breaks", "perf",        "all"};
  const char* env = std::getenv("SMELT_LOGS");
  if (!env || !*env) return false;
  std::stringstream ss(env);
  std::string item;
  bool on = false;
  while (std::getline(ss, item, ',')) {
    if (item == artifact || item == "all") on = true;
    if (!item.empty() && !known.count(item)) {
      static std::mutex m;
      static std::set<std::string> warned;
      std::lock_guard<std::mutex> lock(m);
      if (warned.insert(item).second)
        std::fputs(
            fmt::format("smelt: SMELT_LOGS names an unknown artifact '{}' (known: graph, "
                        "fusion, output_code, recompiles, guards, graph_breaks, perf, all)\n",
                        item)
                .c_str(),
            stderr);
    }
  }
  return on;
}

void log_artifact(const std::string& artifact, const std::string& title, const std::string& body) {
  static std::mutex m;
  std::lock_guard<std::mutex> lock(m);
  std::string text = fmt::format("[smelt:{}] {}\n", artifact, title);
  if (!body.empty()) text += body + (body.back() == '\n' ? "" : "\n");
  std::fputs(text.c_str(), stderr);
  std::fflush(stderr);
}

}  // namespace smelt::compiler
