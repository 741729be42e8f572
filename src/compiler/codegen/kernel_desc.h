// The device-neutral description of one generated kernel: arguments, ranges
// tagged with how they map onto the device (serial, parallel, vector, block,
// thread), loads, stores, accumulators and their cross-lane combination (a row
// split across threads), row buffers of persistent reductions, and the error
// flag. kernel_builder.h builds it from a KernelGroup and its KernelConfig;
// the printer (printer.h) walks it through a Dialect. Every decision is made
// before this point: printing a description decides nothing.
#pragma once
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "compiler/fusion/kernel_config.h"
#include "compiler/lower/index_expr.h"
#include "smelt/dtype.h"
#include "smelt/scalar.h"

namespace smelt::compiler {

/// How a range maps onto the device.
enum class RangeTag {
  Serial,    // a plain loop
  Parallel,  // iterations spread over threads (CPU: OpenMP; CUDA: grid-stride over all threads)
  Vector,    // the innermost loop, vectorizable (contiguous accesses)
  Block,     // CUDA: one iteration per thread block
  Thread,    // CUDA: iterations spread over a block's threads
};
const char* range_tag_name(RangeTag t);

struct Range {
  std::string var;
  IndexExpr extent;
  RangeTag tag = RangeTag::Serial;
};

/// A buffer argument of the kernel (reads first, then writes).
struct KernelArg {
  int buf = -1;
  DType dtype = DType::Float32;
  bool write = false;
  std::string name;  // "in_buf3", "out_buf5"
  /// The pointer is 16-byte aligned at every call (Buffer::aligned).
  bool aligned = false;
  /// A result written into the memory of a read argument (Step::in_place,
  /// Inductor's in_out_ptr): the read argument's name, else "". The result's
  /// pointer is declared from the read one's, so the C++ compiler sees one
  /// object whose elements the kernel reads and writes at distinct offsets
  /// (restrict stays true, loads still merge into vectors); its own
  /// parameter is not used.
  std::string memory_of;
  /// A read argument whose memory a result takes: declared non-const, as
  /// its memory is written through it.
  bool written_through = false;
};
/// "const " for an argument the kernel only reads, else "".
inline const char* const_of(const KernelArg& a) {
  return a.write || a.written_through ? "" : "const ";
}

/// A scalar value expression. Values a kernel computes are named temporaries
/// (Let statements); expressions are shallow trees over them.
struct Expr;
using ExprPtr = std::shared_ptr<const Expr>;
struct Expr {
  enum class Kind {
    Temp,      // a named value: name
    Literal,   // literal, typed dtype
    Load,      // args[arg][index], converted to the value type of dtype
    RowLoad,   // row buffer `name` at index
    Call,      // smelt::scalar::<name><compute>(operands...)
    Convert,   // operands[0] from `from` to dtype (rounds through float16/bfloat16 storage)
    Cast,      // operands[0] from `from` to the value type of dtype, no rounding (to opmath)
    AccValue,  // accumulator `name` (lane `index` when `lane`), result `field`
               // (finalize, value, index, mean, var, std)
    Select,    // operands[0] ? operands[1] : operands[2]
    InBounds,  // true where lo <= e < hi for every (e, lo, hi) of `guard`
    Clamp,     // operands[0] as an int64 index clamped into [0, number)
  };
  Kind kind = Kind::Temp;
  DType dtype = DType::Float32;  // the value's dtype (printed as the dialect's value type)
  std::string name;  // Temp, RowLoad: the variable; Load: the pointer; Call: the functor
  Scalar literal;
  IndexExpr index;
  DType from = DType::Float32;  // Convert, Cast: source dtype; Call: the compute dtype
  std::string field;            // AccValue
  std::string accumulator;      // AccValue: reduce struct name (Sum, Welford, ...)
  DType acc_dtype = DType::Float32;
  double number = 0;  // AccValue: correction (var/std) or row length (mean); Clamp: extent
  std::vector<ExprPtr> operands;
  /// Load: read only where this (bool) expression holds, else 0.
  ExprPtr mask;
  /// InBounds: the conjunction of lo <= e < hi.
  std::vector<std::tuple<IndexExpr, int64_t, int64_t>> guard;
  /// AccValue: the accumulator is lane `index` of an array of them.
  bool lane = false;
  /// Load of a float16 / bfloat16 element: its storage bits, not converted
  /// (what a raw row buffer holds); RowLoad: an element of a raw row buffer,
  /// converted to float.
  bool raw = false;
};

/// How an accumulator combines a row (src/kernels/reduce_ops.h).
enum class AccOrder {
  Plain,   // acc = step(acc, x) in index order (split rows, the CUDA dialect)
  Inner,   // eager's InnerOrder: the row folded through reduce::InnerOrder (AccRun)
  Column,  // eager's ColumnOrder: the row folded through reduce::ColumnOrder (AccRun)
};

struct Stmt {
  enum class Kind {
    Loop,         // range, body
    Let,          // const <value type of dtype> name = value;
    Store,        // pointer `name`[index] = value (rounded to the storage type of dtype)
    RowBuffer,    // a row-local buffer `name` of `extent` values of dtype (with
                  // `raw`: float16 / bfloat16 elements kept in their storage type)
    RowStore,     // name[index] = value
    CheckZero,    // the error flag is set to `code` when value == 0 (integer division)
    CheckIndex,   // the error flag is set to `code` when value is outside [0, extent)
    AccInit,      // accumulator `name` of reduce struct `accumulator` over acc_dtype,
                  // combined in `order` (Inner / Column: the order struct); Plain
                  // with `extent` > 0: an array of `extent` of them (lanes: one per
                  // inner position of a scan); Column with `extent` > 0: a
                  // reduce::ColumnLanes of `extent` lanes
    AccStep,      // Plain: name = step(name, value [, index]) (index: arg-reductions);
                  // with `lane`: the accumulator name[index]; Column (with `lane`):
                  // ColumnLanes `name` steps lane `index`
    AccNext,      // ColumnLanes `name` ends one element of every lane (next())
    AccRun,       // order struct `name` (of reduce struct `accumulator`) folds the
                  // row's elements [index, range.extent) (runs of `extent`
                  // elements): name.stretch<contiguous>(..., get), get(range.var)
                  // being `body` then `value`
    AccFinish,    // name = the result of order struct `partial` (Inner / Column;
                  // with `lane`: of lane `index` of ColumnLanes `partial`)
    SplitReduce,  // the row of `extent` elements cut into stretches, one thread
                  // each (eager's, reduce::row_splits of `rows` outputs): `body` (an AccRun
                  // over [r_begin, r_end)) folds a stretch into order struct
                  // `partial`; the stretches' results combined in order into `name`
  };
  Kind kind = Kind::Let;
  Range range;
  std::vector<Stmt> body;
  std::string name;
  DType dtype = DType::Float32;
  ExprPtr value;
  IndexExpr index;
  int64_t extent = 0;
  std::string accumulator;
  DType acc_dtype = DType::Float32;
  std::string partial;  // SplitReduce; AccFinish: the order struct
  bool indexed = false;
  AccOrder order = AccOrder::Plain;  // AccInit, AccStep, SplitReduce
  bool contiguous = false;           // AccRun: runs are contiguous in eager's layout
  int64_t rows = 0;                  // SplitReduce: the reduction's outputs
  ExprPtr mask;                      // CheckZero, CheckIndex: checked only where this holds
  int code = 0;                      // CheckZero, CheckIndex: the op table's RuntimeCheck
  bool lane = false;  // AccStep, AccFinish: the accumulator is lane `index` of an array
  bool raw = false;   // RowBuffer: holds storage bits (see Expr::raw)
  /// AccRun: where set, body and value index the element by its place in
  /// the stretch, this variable (range.var - index), not by range.var.
  std::string run_var;
};

struct KernelDesc {
  std::string name;
  KernelConfig config;
  std::vector<KernelArg> args;
  std::vector<Stmt> body;
  /// Ops whose runtime check may fail ("remainder/fmod"), "" if none: the
  /// kernel then takes an error flag.
  std::string error_ops;
  std::vector<std::string> ops;  // op names computed
};

}  // namespace smelt::compiler
