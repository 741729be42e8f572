// One C-like printer for generated kernels, with a dialect per backend: the
// C++ dialect (OpenMP, extern "C" entry points) today, a CUDA dialect later
// (__global__, thread indices) reusing the same statement and expression code.
#pragma once
#include <string>
#include <vector>

#include "smelt/dtype.h"
#include "smelt/scalar.h"

namespace smelt::compiler {

class Dialect {
 public:
  virtual ~Dialect() = default;
  virtual std::string name() const = 0;  // "cpp", "cuda": the kernel name prefix
  /// Preamble of a translation unit: includes, and the embedded scalar/reduce
  /// op headers, so generated code computes with the very source eager uses.
  virtual std::string preamble() const = 0;
  /// Kernel signature: every kernel takes its buffer pointers as one array.
  virtual std::string kernel_signature(const std::string& name) const = 0;
  /// A parallel loop `for (int64_t var = 0; var < extent; ++var)`, parallel
  /// when `parallel` (work decided by the scheduler).
  virtual std::string parallel_for(const std::string& var, const std::string& extent,
                                   bool parallel) const = 0;
  /// C type holding an element of `t` in memory.
  virtual std::string storage_type(DType t) const;
  /// C type a value of `t` is computed in (float for float16/bfloat16).
  virtual std::string value_type(DType t) const;
  /// A literal of `s` typed as `t`.
  virtual std::string literal(const Scalar& s, DType t) const;
};

class CppDialect : public Dialect {
 public:
  std::string name() const override { return "cpp"; }
  std::string preamble() const override;
  std::string kernel_signature(const std::string& name) const override;
  std::string parallel_for(const std::string& var, const std::string& extent,
                           bool parallel) const override;
};

/// Indented line buffer.
class CodeBuffer {
 public:
  void line(const std::string& s);
  void indent() { ++depth_; }
  void dedent() { --depth_; }
  std::string str() const { return out_; }

 private:
  std::string out_;
  int depth_ = 0;
};

}  // namespace smelt::compiler
