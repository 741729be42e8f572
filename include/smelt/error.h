// smelt/error.h — the one exception type users see.
//
// A smelt::Error message starts with the op name, shows the offending shapes,
// dtypes or devices, and says what to do. Internal invariant failures (bugs in
// smelt) are also smelt::Error but their message starts with "internal error".
#pragma once
#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace smelt {

/// Raised for every invalid use of the API (bad shape, dtype, device, dim,
/// index, argument) and for compiler failures. Never a crash or abort.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

/// Raised while tracing when the computation needs tensor data (item(),
/// printing values, an op without a lowering). compile() catches it and runs
/// the call eagerly (a "graph break"), or rethrows it as Error under fullgraph.
class GraphBreak : public Error {
 public:
  explicit GraphBreak(const std::string& what) : Error(what) {}
};

namespace detail {
[[noreturn]] void throw_error(const std::string& msg);
[[noreturn]] void throw_internal(const char* file, int line, const std::string& msg);
}  // namespace detail

}  // namespace smelt

/// SMELT_CHECK(cond, "fmt", args...): throw smelt::Error with the formatted message.
#define SMELT_CHECK(cond, ...)                                           \
  do {                                                                   \
    if (!(cond)) ::smelt::detail::throw_error(::fmt::format(__VA_ARGS__)); \
  } while (0)

/// SMELT_INTERNAL_ASSERT(cond, "fmt", args...): an invariant of smelt itself.
#define SMELT_INTERNAL_ASSERT(cond, ...)                                                \
  do {                                                                                  \
    if (!(cond))                                                                        \
      ::smelt::detail::throw_internal(__FILE__, __LINE__, ::fmt::format(__VA_ARGS__)); \
  } while (0)
