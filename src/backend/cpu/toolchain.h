// The CPU toolchain: generated C++ built by the system compiler (g++ by
// default, SMELT_CXX overrides) with -O3 -march=native -fopenmp -shared into a
// shared object, then dlopen()ed. Where binaries are kept (hashing, cache
// directory, verification, atomic publication) is the ModuleCache's business
// (src/compiler/runtime/kernel_cache.h); this file only compiles and loads.
#pragma once
#include <memory>
#include <string>

#include "backend/backend.h"

namespace smelt::cpu {

/// Builds (or loads through `cache`) C++ `source` into a loaded shared object
/// whose kernels are `void name(void* const* args)`. Throws
/// backend::ToolchainUnavailable when the compiler is missing, hangs (past
/// SMELT_COMPILE_TIMEOUT seconds, default 300) or exits 0 without writing the
/// shared object; Error when it fails (with the command, its output and the
/// path of the source) or when SMELT_COMPILE_TIMEOUT is not a whole number of
/// seconds from 1 to 86400.
std::shared_ptr<backend::Module> build_module(const std::string& source,
                                              backend::ModuleCache& cache,
                                              backend::BuildInfo* info);

}  // namespace smelt::cpu
