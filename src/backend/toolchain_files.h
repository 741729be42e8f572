// What the toolchains (backend/cpu, backend/cuda) and the kernel cache that
// keeps their binaries (compiler/runtime/kernel_cache) share about files of
// generated code.
#pragma once
#include <string>

namespace smelt::backend {

/// The contents of the file at `path` ("", and *ok false, when it cannot be
/// read).
std::string read_file(const std::string& path, bool* ok = nullptr);

/// The line a generated C++ translation unit has after its preamble (system
/// headers and the embedded functors: the same text in every unit of a
/// dialect). The CPU toolchain compiles what comes before it once, as a
/// precompiled header, and each unit then includes that instead of parsing it.
inline constexpr const char* kPreambleEnd = "// ---- end of the smelt JIT preamble\n";

}  // namespace smelt::backend
