// smelt/kernels/embedded_source.h — the kernel headers (half.h, vector_math.h,
// scalar_ops.h, reduce_ops.h...) as text for generated translation units. The
// build embeds them into the library (cmake/embed.cmake), so JIT code compiles
// the very source the eager kernels were compiled from, and nothing is read
// from the source tree at run time.
#pragma once
#include <initializer_list>
#include <string>

namespace smelt::kernels {

/// The embedded headers `names` (file names: "scalar_ops.h"), in that order,
/// each behind a "// ---- <name> (embedded) ----" line, without `#pragma once`
/// and without their `#include "..."` lines (the headers named earlier stand
/// in for them). `#include <...>` lines are kept when `keep_system_includes`
/// (host C++), dropped otherwise (NVRTC, which has no system headers). An
/// unknown name is an internal error.
std::string embedded_source(std::initializer_list<const char*> names, bool keep_system_includes);

}  // namespace smelt::kernels
