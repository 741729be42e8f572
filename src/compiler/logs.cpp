#include "compiler/logs.h"

#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <sstream>

namespace smelt::compiler {

bool log_enabled(const std::string& artifact) {
  const char* env = std::getenv("SMELT_LOGS");
  if (!env || !*env) return false;
  std::stringstream ss(env);
  std::string item;
  while (std::getline(ss, item, ','))
    if (item == artifact || item == "all") return true;
  return false;
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
