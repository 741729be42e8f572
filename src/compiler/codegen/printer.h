// One C-like printer for generated kernels, with a dialect per backend
// (tinygrad's CStyleLanguage, DESIGN.md principle 7): print_kernel() walks a
// KernelDesc and prints every statement and expression the same way for all
// targets; a Dialect supplies only what differs — the kernel signature and
// argument unpacking, how a range maps onto threads (OpenMP loops on the CPU,
// the grid on CUDA), barriers, cross-lane reduction of a split row, vector
// loads and stores, setting the error flag, and type names.
#pragma once
#include <string>
#include <vector>

#include "compiler/codegen/kernel_desc.h"
#include "smelt/dtype.h"
#include "smelt/scalar.h"

namespace smelt::compiler {

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

class Dialect {
 public:
  virtual ~Dialect() = default;
  virtual Target target() const = 0;
  /// "cpp", "cuda": the kernel name prefix.
  std::string name() const { return target_name(target()); }
  /// Preamble of a translation unit: includes (or a device prelude), and the
  /// embedded scalar/reduce op headers, so generated code computes with the
  /// very source eager uses.
  virtual std::string preamble() const = 0;
  /// Opens the kernel: signature and the local names of its arguments (and of
  /// the error flag when `error_flag`).
  virtual void kernel_begin(const KernelDesc& k, CodeBuffer& out) const = 0;
  /// Opens a range: a loop, or the mapping of its iterations onto threads.
  virtual void range_begin(const Range& r, const KernelConfig& c, CodeBuffer& out) const = 0;
  /// Closes what range_begin opened ("}" by default).
  virtual void range_end(const Range& r, const KernelConfig& c, CodeBuffer& out) const;
  /// Declares row buffer `name` of `extent` values of C type `type`
  /// (Stmt::RowBuffer), and names the slot holding element `index` of the row
  /// (the index itself by default: one thread holds the whole row).
  virtual std::string row_buffer(const std::string& type, const std::string& name, int64_t extent,
                                 const KernelConfig& c) const;
  virtual std::string row_slot(const IndexExpr& index, const KernelConfig& c) const;
  /// The text of a load's or store's element index (index.str() by default;
  /// a dialect may write it in terms of its own loop variables).
  virtual std::string element_index(const IndexExpr& index, const KernelConfig& c) const;
  /// Prefix of a statement a reduction kernel runs once per row, outside the
  /// loops over the row's elements (a store of a per-row result): "" where one
  /// thread handles the row, a guard letting one of its threads run it where
  /// several share it.
  virtual std::string once_per_row(const KernelConfig& c) const { return ""; }
  /// A barrier among the threads that share a range ("" where none is needed).
  virtual std::string barrier() const = 0;
  /// Prints a row split across threads (Stmt::SplitReduce): each stretch
  /// [r_begin, r_end) folded by `loop` into its own order struct `s.partial`
  /// over accumulator `acc_type`, the results combined into `s.name` in order.
  virtual void split_reduce(const Stmt& s, const std::string& acc_type, const std::string& loop,
                            const KernelConfig& c, CodeBuffer& out) const = 0;
  /// Statement that sets the kernel's error flag to `code` (a RuntimeCheck of
  /// the op table: the runtime names the failed check from it).
  virtual std::string set_error_flag(int code) const = 0;
  /// A load of element `index` of `ptr`, and a store (vector forms where a
  /// dialect proves them legal).
  virtual std::string load(const std::string& ptr, const std::string& index) const;
  virtual std::string store(const std::string& ptr, const std::string& index,
                            const std::string& value) const;
  /// The statement folding the elements [r0, r1) of a row (in runs of `run`)
  /// into order struct `order`, element r read at pointer[r] (a run
  /// contiguous in memory, of the accumulate type), that the host folds in
  /// whole vectors as eager's reduce kernels fold theirs; "" where the dialect
  /// has none (the element is then computed by a lambda).
  virtual std::string contiguous_stretch(const std::string& order, const std::string& r0,
                                         const std::string& r1, int64_t run,
                                         const std::string& pointer) const {
    return "";
  }
  /// The result of order struct `partial` (reduce_ops.h), or of its lane
  /// `lane` where `lane` is not empty (ColumnLanes).
  virtual std::string order_result(const std::string& partial, const std::string& lane) const;
  /// Integer type of index arithmetic of `bits` width.
  virtual std::string index_type(int bits) const;
  /// C type holding an element of `t` in memory.
  virtual std::string storage_type(DType t) const;
  /// C type a value of `t` is computed in (float for float16/bfloat16).
  virtual std::string value_type(DType t) const;
  /// A float16/bfloat16 element `v` (of storage_type) as a float, and a float
  /// `v` rounded to nearest-even into float16/bfloat16 storage (the CPU: the
  /// conversions of smelt/half.h; CUDA: the hardware's cvt instructions, the
  /// same values).
  virtual std::string half_to_float(DType t, const std::string& v) const;
  virtual std::string float_to_half(DType t, const std::string& v) const;
  /// Stores of `t` elements in the vector loop range_begin opens for `r`
  /// that are staged: each lane's float kept in a float array, the last lane
  /// converting them all (floats_to_half) and storing them together. The
  /// loop's lane variable, or "" where such stores are not staged (the
  /// default: each is converted and stored where it is computed).
  virtual std::string staged_store_lane(const Range& r, const KernelConfig& c, DType t) const {
    return "";
  }
  /// Statement converting the float array `floats` to the storage array
  /// `bits` of `t` (as float_to_half converts each).
  virtual std::string floats_to_half(DType t, const std::string& floats,
                                     const std::string& bits) const {
    return "";
  }
  /// The condition under which floats_to_half's bits of `floats` differ from
  /// float_to_half's (the vector's elements are then stored again through
  /// float_to_half), "" where they never do (the default).
  virtual std::string staged_store_redo(DType t, const std::string& floats) const { return ""; }
  /// A literal of `s` typed as `t`.
  virtual std::string literal(const Scalar& s, DType t) const;
};

/// The C++ dialect: extern "C" functions over one argument array, OpenMP
/// parallel loops, per-thread partial accumulators for split rows.
class CppDialect : public Dialect {
 public:
  Target target() const override { return Target::Cpp; }
  std::string preamble() const override;
  void kernel_begin(const KernelDesc& k, CodeBuffer& out) const override;
  void range_begin(const Range& r, const KernelConfig& c, CodeBuffer& out) const override;
  std::string barrier() const override { return ""; }
  void split_reduce(const Stmt& s, const std::string& acc_type, const std::string& loop,
                    const KernelConfig& c, CodeBuffer& out) const override;
  std::string set_error_flag(int code) const override;
  std::string contiguous_stretch(const std::string& order, const std::string& r0,
                                 const std::string& r1, int64_t run,
                                 const std::string& pointer) const override;
  std::string order_result(const std::string& partial, const std::string& lane) const override;
};

/// The printed source of one kernel.
std::string print_kernel(const KernelDesc& k, const Dialect& d);

}  // namespace smelt::compiler
