// The on-disk kernel cache: a content-addressed store of built modules, the
// backend::ModuleCache that every toolchain builds through.
//
// The cache lives in SMELT_CACHE_DIR (default ~/.cache/smelt). smelt creates it
// and its missing parents with mode 0700, and never changes the mode of a
// directory that exists: one that others may write and that has the sticky
// bit (such as /tmp) holds the cache in a private subdirectory smelt-<uid>;
// one that others may write without the sticky bit, that another user owns,
// or that is not a directory is refused (it holds code that gets loaded). An entry is keyed by a
// hash of the source, the toolchain's fingerprint (flags, compiler and its version, target CPU or
// GPU) and smelt's version; <key><source ext> holds the source beside the binary <key><binary ext>,
// and <key>.meta records the binary's size and hash so that a corrupt or truncated binary is
// detected and rebuilt. Files are written under temporary names and renamed, and builds of one key
// are serialized, so concurrent builds (threads or processes) are safe.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "backend/backend.h"
#include "backend/toolchain_files.h"

namespace smelt::compiler {

class KernelCache final : public backend::ModuleCache {
 public:
  std::shared_ptr<backend::Module> get_or_build(const std::string& source,
                                                const std::string& fingerprint,
                                                const std::string& source_ext,
                                                const std::string& binary_ext,
                                                const CompileFn& compile, const LoadFn& load,
                                                backend::BuildInfo* info) override;
};

/// The process-wide kernel cache (its directory is read from the environment
/// at every build, so SMELT_CACHE_DIR may change between compiles).
KernelCache& kernel_cache();

/// The cache directory (created 0700 on first use; `<SMELT_CACHE_DIR>/smelt-<uid>`
/// when SMELT_CACHE_DIR is a shared sticky directory such as /tmp). Throws
/// backend::ToolchainUnavailable, naming the directory and the reason, when it
/// cannot be used.
std::string cache_dir();

/// Number of builds (compiler invocations) in this process (tests assert a
/// warm run makes none).
int compiler_invocations();

// ---- the cache's file handling, shared by the stores beside it (plans,
// autotuning choices) ----

/// FNV-1a (64 bits) of `s`, continuing from `h`: the hash of cache keys.
uint64_t fnv1a(const std::string& s, uint64_t h = 1469598103934665603ull);
using backend::read_file;
/// Writes `data` to `path` through a temporary file renamed over it (readers
/// never see half a file); backend::ToolchainUnavailable when it cannot.
void write_atomic(const std::string& path, const std::string& data);

}  // namespace smelt::compiler
