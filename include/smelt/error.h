// smelt/error.h — the one exception type users see.
//
// A smelt::Error message starts with the op name, shows the offending shapes,
// dtypes or devices, and says what to do. Internal invariant failures (bugs in
// smelt) are also smelt::Error but their message starts with "internal error".
#pragma once
#include <fmt/format.h>

#include <stdexcept>
#include <string>
#include <utility>

namespace smelt {

/// Raised for every invalid use of the API (bad shape, dtype, device, dim,
/// index, argument) and for compiler failures. Never a crash or abort.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

/// Raised while tracing when the computation cannot be captured: it needs
/// tensor data (item(), to_vector(), data_ptr(), printing), draws random
/// numbers, or writes into a tensor the graph does not own. compile() catches
/// it and runs the call eagerly (a "graph break"), or raises an Error built
/// from it under fullgraph=true.
class GraphBreak : public Error {
 public:
  /// `op`: what broke the graph, as the user wrote it ("item()", "randn",
  /// "add_"); `reason`: why it cannot be captured; `advice`: how to keep it out
  /// of the compiled function (shown under fullgraph, where nothing runs
  /// eagerly). what() is "<op>: <reason>".
  GraphBreak(std::string op, std::string reason, std::string advice)
      : Error(op + ": " + reason),
        op_(std::move(op)),
        reason_(std::move(reason)),
        advice_(std::move(advice)) {}
  /// A break whose op is not known (what() is the whole message).
  explicit GraphBreak(const std::string& what) : Error(what), reason_(what) {}

  const std::string& op() const { return op_; }
  const std::string& reason() const { return reason_; }
  const std::string& advice() const { return advice_; }

 private:
  std::string op_, reason_, advice_;
};

/// Raised when a device cannot provide the memory a tensor needs (PyTorch's
/// OutOfMemoryError). The message names the op, the shape, dtype and size of
/// the tensor it was allocating, and what to do.
class OutOfMemoryError : public Error {
 public:
  explicit OutOfMemoryError(const std::string& what) : Error(what) {}
};

namespace detail {
[[noreturn]] void throw_error(const std::string& msg);
[[noreturn]] void throw_internal(const char* file, int line, const std::string& msg);
}  // namespace detail

}  // namespace smelt

/// SMELT_CHECK(cond, "fmt", args...): throw smelt::Error with the formatted message.
#define SMELT_CHECK(cond, ...)                                             \
  do {                                                                     \
    if (!(cond)) ::smelt::detail::throw_error(::fmt::format(__VA_ARGS__)); \
  } while (0)

/// SMELT_INTERNAL_ASSERT(cond, "fmt", args...): an invariant of smelt itself.
#define SMELT_INTERNAL_ASSERT(cond, ...)                                                          \
  do {                                                                                            \
    if (!(cond)) ::smelt::detail::throw_internal(__FILE__, __LINE__, ::fmt::format(__VA_ARGS__)); \
  } while (0)
