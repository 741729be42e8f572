// Building and loading generated C++: the system compiler (g++ by default,
// SMELT_CXX overrides) with -O3 -march=native -fopenmp -shared, then dlopen.
//
// The kernel cache lives in SMELT_CACHE_DIR (default ~/.cache/smelt), created
// with mode 0700 and refused if another user owns it or others can write it
// (it holds code that gets loaded). An entry is keyed by a hash of the source,
// the flags, the compiler's version, the CPU (model and ISA flags) and smelt's
// version; <key>.cpp holds the source beside <key>.so, and <key>.meta records
// the binary's size and hash so that a corrupt or truncated binary is detected
// and rebuilt. Files are written under temporary names and renamed, so
// concurrent builds (threads or processes) are safe.
#pragma once
#include <memory>
#include <string>

#include "smelt/error.h"

namespace smelt::compiler {

/// The JIT cannot run on this machine (no usable compiler, an unusable cache
/// directory, a compiler that hangs): compile() warns and runs eagerly.
class JitUnavailable : public Error {
 public:
  using Error::Error;
};

class KernelLibrary {
 public:
  KernelLibrary(void* handle, std::string path) : handle_(handle), path_(std::move(path)) {}
  ~KernelLibrary();
  KernelLibrary(const KernelLibrary&) = delete;
  KernelLibrary& operator=(const KernelLibrary&) = delete;
  /// The kernel entry point `name`; Error if missing.
  using KernelFn = void (*)(void* const*);
  KernelFn kernel(const std::string& name) const;
  const std::string& path() const { return path_; }

 private:
  void* handle_;
  std::string path_;
};

struct BuildInfo {
  bool cache_hit = false;   // loaded from the disk cache, no compiler run
  double build_ms = 0;      // compiler wall time (0 on a hit)
  std::string key;          // cache key
  std::string source_path;  // where the source is stored
};

/// Builds (or loads from the cache) `source` into a shared library.
/// Throws Error when the compiler is missing or fails (with the command, its
/// output and the path of the source).
std::shared_ptr<KernelLibrary> build_library(const std::string& source, BuildInfo* info = nullptr);

/// The cache directory (created 0700 on first use).
std::string cache_dir();

/// Number of compiler invocations in this process (tests assert a warm run makes none).
int compiler_invocations();

}  // namespace smelt::compiler
