// Fetching pretrained models through tools/fetch_model.py (see pretrained.h).
#include "nn/pretrained.h"

#include <fmt/format.h>

#include <cctype>
#include <cstdio>
#include <filesystem>
#include <map>
#include <mutex>

#include "smelt/error.h"

namespace smelt::models {

std::string fetch_pretrained(const std::string& name) {
  // One check per process and model (the script hashes ~90 MB each time).
  static std::mutex mu;
  static std::map<std::string, std::string> done;
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = done.find(name); it != done.end()) return it->second;
  // The source tree's script in a build tree; the installed copy otherwise.
  std::string script = SMELT_FETCH_MODEL_SCRIPT;
  if (!std::filesystem::is_regular_file(script)) script = SMELT_INSTALLED_FETCH_MODEL_SCRIPT;
  SMELT_CHECK(std::filesystem::is_regular_file(script),
              "fetch_pretrained: {} is missing; it fetches model {}", script, name);
  for (char c : name)
    SMELT_CHECK(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.',
                "fetch_pretrained: \"{}\" is not a model name", name);
  const std::string cmd = fmt::format("python3 '{}' '{}'", script, name);
  FILE* p = popen(cmd.c_str(), "r");
  SMELT_CHECK(p != nullptr, "fetch_pretrained: cannot run {}", cmd);
  std::string out;
  char buf[512];
  while (size_t n = std::fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  const int status = pclose(p);
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  SMELT_CHECK(status == 0 && !out.empty() && std::filesystem::is_directory(out),
              "fetch_pretrained: `{}` failed (status {}); see its messages above. It needs "
              "python3 with pip and access to PyPI the first time",
              cmd, status);
  done.emplace(name, out);
  return out;
}

}  // namespace smelt::models
