// Differential fuzzing of smelt::compile against eager mode, and of eager mode
// on a GPU against eager mode on the CPU (FuzzOptions::device). Not part of the
// library: built as the static library smelt_fuzz, which `smelt fuzz` and
// tests/fuzz/test_fuzz.cpp link.
//
// A seeded generator (std::mt19937_64, never the global smelt generator)
// builds a random *program*: 1-3 input tensors (random shapes of rank 0-4 with
// sizes 0 and 1, broadcastable to each other, random dtypes, sometimes
// non-contiguous views of a bigger tensor) and 2-10 draws of a step (a matmul
// may add a t() of its right operand, as linear layers have). Each step is one op
// of the op table (src/ops/op_table.h) called by name through detail::call_op,
// with tensor arguments, Python numbers (wrapped scalars) and keyword
// attributes. The pointwise ops (by arity, with their attribute variants and
// scalar operands) and the reductions (with their dims / keepdim / dtype /
// correction arguments, and any of their outputs) are taken from the op table;
// views, data movement, casts, softmax / log_softmax / layer_norm and matmul
// get op-specific argument builders. Every candidate step is run eagerly while
// generating; a step that raises smelt::Error is discarded, so only valid
// programs are kept. The program is a plain list of steps, interpreted the same
// way eagerly and inside smelt::compile, and the outputs are compared:
//
//  * shape and dtype exactly; integer and bool values exactly;
//  * floating values: NaN positions equal, infinities equal (same sign), and
//    |compiled - eager| <= atol + rtol * |eager| with, per dtype,
//        float64 1e-10 / 1e-10, float32 1e-5 / 1e-5,
//        float16 1e-2 / 1e-2,   bfloat16 5e-2 / 5e-2,
//    or the value's *error scale* where that is larger. A value's tolerance
//    follows the dtype it was computed in, not the dtype it ends in (a float32
//    exp cast to float64 keeps float32's tolerance): library math
//    (Precision::Transcendental: exp, sin, pow, ...) gets its dtype's
//    tolerance as a margin (generated code calls the same functions: same bits);
//    floating reductions (Precision::Accumulated: sum, mean, var, softmax,
//    matmul, ...) multiply it by their length, since a row split across
//    threads (eager or compiled) or a GEMM sums in another order; chained
//    float16/bfloat16 computations add their dtype's tolerance each.
//
// A third of the programs are *half programs*: their inputs, casts and dtype=
// arguments are mostly float16 / bfloat16.
//
// Gradient programs (`smelt fuzz --grad`, Program::grad): float32 / float64
// inputs that require grad (integer and bool ones besides), and a function
// that, after the steps, calls backward() on sum_k sum(out_k * c_k) over its
// floating outputs that require grad (c_k: fixed pseudo-random coefficients of
// out_k's shape, so that every element's gradient differs): the compiled
// graph then holds the backward pass, traced through the op table's
// derivatives. The inputs' .grad are compared with eager's besides the
// outputs, within the largest tolerance scale of the program's values (a
// gradient mixes all of them) times kGradTolFactor, at least the dtype's
// tolerance. Every other gradient program (odd cases,
// Program::backward_outside) runs no backward() itself: its caller runs it on
// the function's results, so the compiled function is a compiled forward
// whose CompiledFunctionBackward node runs a compiled backward graph (the
// joint trace split in two); the even ones compile the backward into the
// function's graph. Ops whose derivative jumps where their value does not (abs,
// relu, maximum, clamp, amax, ..., kinked_ops()) never take inexact values in
// a gradient program: a rounding difference could move a tie or a kink.
//
// Values whose eager and compiled results may legitimately differ by rounding
// ("inexact": anything downstream of a floating reduction or of a chained
// float16/bfloat16 op) are never fed to discontinuous ops (OpDef::discontinuous:
// floor, round, comparisons, argmax, remainder, ...; and float->int casts),
// where a rounding difference could flip the result. Float->int casts of
// non-finite or out-of-range values (undefined in C++) and integer division by
// zero (RuntimeCheck::IntegerDivisionByZero) are never generated, nor Welford
// reductions (var, std, var_mean) over values with +-inf, whose result (NaN or
// +-inf) depends on the order elements are combined in, in PyTorch as here.
#pragma once
#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "ops/dispatch.h"
#include "smelt/dtype.h"
#include "smelt/scalar.h"
#include "smelt/tensor.h"

namespace smelt::fuzz {

/// One input of a program: the tensor handed to the function is a view
/// (`sizes`, `strides`, `offset`) into a fresh buffer of `base_numel` elements
/// filled from `data_seed`.
struct InputSpec {
  Shape sizes;
  Shape strides;
  int64_t offset = 0;
  int64_t base_numel = 0;
  DType dtype = DType::Float32;
  uint64_t data_seed = 0;
  bool specials = false;       // sprinkle NaN / +-inf / -0.0 / 0 / 1 into float data
  std::string layout;          // "contiguous", "transposed", "sliced", "expanded", ...
  bool requires_grad = false;  // a leaf that requires grad (gradient programs)
};

/// One step: `out = call_op(op, args, attrs)[output]`, where args are the
/// values `in` with the Python numbers `wrapped` inserted at their positions.
struct Step {
  std::string op;                                  // an op-table name
  std::vector<int> in;                             // value ids (inputs are 0..n_inputs-1)
  std::vector<std::pair<size_t, Scalar>> wrapped;  // (argument position, number), sorted
  detail::Attrs attrs;                             // keyword arguments, PyTorch's names
  int output = 0;                                  // which output of a multi-output op
};

struct Program {
  std::vector<InputSpec> inputs;
  std::vector<Step> steps;
  std::vector<int> outputs;      // value ids returned (as std::vector<Tensor>)
  std::vector<double> scale;     // per value: tolerance multiplier (see above)
  std::string mode = "default";  // compile mode ("default" / "reduce-overhead")
  std::vector<std::string> off;  // compile stages turned off: "fuse", "cse", "gemm_epilogue", ...
  /// A gradient program: the function also runs backward() (see above) and the
  /// inputs' .grad are compared.
  bool grad = false;
  /// A gradient program whose function only returns its outputs: its caller
  /// runs the backward pass on them (call_program).
  bool backward_outside = false;
};

/// Builds the input tensors of a program (deterministic from the specs).
std::vector<Tensor> make_inputs(const Program& p);
/// Runs the program's steps over `inputs` (works eagerly and while tracing);
/// for a gradient program whose function runs it, then backward() from its
/// outputs (see above).
std::vector<Tensor> interpret(const Program& p, const std::vector<Tensor>& inputs);
/// Runs the program as its caller does: interpret(), then, for a gradient
/// program whose backward runs outside the function, backward() from its outputs.
std::vector<Tensor> call_program(const Program& p, const std::vector<Tensor>& inputs);
/// Readable C++-like form of the program, inputs included.
std::string program_str(const Program& p);
/// The random program of case `index` of a run with `seed` (a gradient
/// program with `grad`).
Program generate(uint64_t seed, int index, bool grad = false);
/// The program of the given steps (their `output` kept) over `inputs`, with
/// the tolerance scales the generator gives them; raises smelt::Error when a
/// step is one the generator would not keep (it raises eagerly, say).
Program replay(const std::vector<InputSpec>& inputs, const std::vector<Step>& steps,
               const std::vector<int>& outputs);

struct CaseResult {
  bool ok = true;
  bool graph_break = false;  // the compiled function ran eagerly (not a mismatch)
  int grads = 0;             // input gradients compared (gradient programs)
  std::string summary;       // one line: what failed
  std::string report;        // full reproducer (empty when ok)
  std::string kernels;       // the compiled graph's steps (kernel names)
};
/// Runs `p` eagerly and compiled and compares; `seed`/`index` only label the report.
CaseResult check_program(const Program& p, uint64_t seed, int index);
/// Runs `p` eagerly on the CPU, eagerly on `device` (its inputs moved there)
/// and compiled on `device`, and compares as check_program does: the device's
/// eager results and its compiled ones against the CPU's eager ones, and the
/// compiled ones against the device's eager ones (the device's library math
/// and summation order differ from the CPU's as generated code's do).
CaseResult check_program_on_device(const Program& p, Device device, uint64_t seed, int index);
/// Drops every step and output the first failing output does not need, and
/// returns the smallest program that still fails (or `p` if none does), as
/// check_program says, or check_program_on_device with `device`.
Program minimize(const Program& p, uint64_t seed, int index,
                 std::optional<Device> device = std::nullopt);

struct FuzzSummary {
  int cases = 0;
  int mismatches = 0;
  int graph_breaks = 0;
  int grad_cases = 0;                    // cases that compared at least one input gradient
  std::vector<std::string> failures;     // the one-line summaries
  std::map<std::string, int> op_counts;  // steps generated per op
};
struct FuzzOptions {
  int cases = 100;
  uint64_t seed = 0;
  bool verbose = false;
  bool grad = false;     // gradient programs (compiled backward against eager backward)
  bool minimize = true;  // print a minimized reproducer after a failure
  /// Empty: compiled vs eager. "cuda" (or "cuda:N"): eager and compiled on that
  /// device vs eager on the CPU, and compiled vs eager there (check_program_on_device).
  std::string device;
  /// Called after every case with the counts so far (`smelt fuzz` draws its progress line).
  std::function<void(const FuzzSummary&)> on_case;
  /// Called before anything is written to the log (to erase a progress line first).
  std::function<void()> before_log;
};
/// The op-table ops the generator can draw (what `op_counts` is measured against).
std::vector<std::string> fuzzed_ops();
/// The drawn ops whose derivative is discontinuous where the op is not (abs,
/// relu, maximum, clamp, amax, ...): in gradient programs they take exact values only.
const std::set<std::string>& kinked_ops();
/// A gradient program's gradient tolerance: this times its largest tolerance scale.
constexpr double kGradTolFactor = 16;
/// Sets SMELT_CACHE_DIR to a private directory under /tmp unless the user set it.
void use_private_cache_dir();
/// Runs `opts.cases` cases; prints one line per failing case (and its
/// reproducer) to `log` (stdout when null; pass `verbose` for every case).
FuzzSummary run(const FuzzOptions& opts, std::FILE* log = nullptr);

}  // namespace smelt::fuzz
