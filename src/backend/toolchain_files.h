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

/// The line generated C++ code has before its first standard header: it marks
/// libstdc++'s <bits/specfun.h> as included, so that <cmath> leaves out C++17's
/// mathematical special functions (std::beta, std::riemann_zeta, ...), which no
/// kernel calls. Inline wrappers there use function templates, which GCC
/// instantiated again at the end of every translation unit, precompiled header
/// or not: 18 of a one-kernel unit's 70 ms of compiling on a 2-core EPYC, 16 of
/// 52 ms on a 16-core Xeon (g++ 12). It changes no generated code, and nothing
/// with another standard library.
inline constexpr const char* kNoSpecialMathFunctions =
    "// No C++17 special math functions (toolchain_files.h: less to compile).\n"
    "#define _GLIBCXX_BITS_SPECFUN_H 1\n";

}  // namespace smelt::backend
