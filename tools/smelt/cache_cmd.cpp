// `smelt cache [--clear]`: where smelt::compile keeps its kernels, how many
// there are and the space they take; --clear deletes them (each is rebuilt the
// next time a function needs it). Only the cache's own files are touched:
// <16 hex digits> with the extension of a source (.cpp, .cu, the CPU units'
// preamble .h), a binary (.so, the math functions' .o, the precompiled
// preamble .h.gch, .cubin, .ptx) or a checksum (.meta), compiled plans
// <16 hex digits>.plan (runtime/plan_cache.h) and leftover temporaries of them.
#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "commands.h"
#include "compiler/runtime/kernel_cache.h"
#include "core/tensor_impl.h"

namespace smelt::cli {

int cmd_cache(const CacheOptions& opts) {
  namespace fs = std::filesystem;
  const std::string dir = compiler::cache_dir();
  static const std::regex entry(
      R"([0-9a-f]{16}\.(cpp|cu|h|so|o|h\.gch|cubin|ptx|meta|plan)(\.tmp\..*)?)");
  std::set<std::string> kernels;
  int64_t bytes = 0, files = 0;
  std::vector<fs::path> mine;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (!e.is_regular_file() || !std::regex_match(name, entry)) continue;
    mine.push_back(e.path());
    if (name.find(".plan") == std::string::npos) kernels.insert(name.substr(0, 16));
    bytes += static_cast<int64_t>(e.file_size());
    ++files;
  }
  const char* env = std::getenv("SMELT_CACHE_DIR");
  if (!opts.clear) {
    std::printf("kernel cache: %s (%s)\n", dir.c_str(),
                env && *env ? "from SMELT_CACHE_DIR" : "the default; SMELT_CACHE_DIR moves it");
    std::printf("%zu compiled kernel modules, %s in %ld files\n", kernels.size(),
                detail::bytes_str(bytes).c_str(), static_cast<long>(files));
    std::printf("nothing is evicted; `smelt cache --clear` deletes them (rebuilt when needed)\n");
    return 0;
  }
  int64_t removed = 0;
  for (const auto& p : mine) {
    std::error_code ec;
    if (fs::remove(p, ec)) ++removed;
  }
  std::printf("removed %ld files (%s, %zu kernel modules) from %s\n", static_cast<long>(removed),
              detail::bytes_str(bytes).c_str(), kernels.size(), dir.c_str());
  return removed == files ? 0 : 1;
}

}  // namespace smelt::cli
