// How one fused kernel is laid out on its device: a value object (hashable,
// comparable, printable) chosen by a heuristic here in fusion/ — later by the
// autotuner — and carried unchanged into the kernel description, so that the
// code generator makes no decision of its own. The same KernelConfig is a
// cache key, a log line (SMELT_LOGS=output_code prints it) and an autotuning
// candidate (nvFuser's HeuristicParams, tinygrad's Opt).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace smelt::compiler {

struct Graph;
struct KernelGroup;
struct GroupFootprint;

/// The device a kernel is laid out for (the backend's code dialect).
enum class Target { Cpp, Cuda };
const char* target_name(Target t);  // "cpp", "cuda": the kernel-name prefix

/// Elements below which a CPU kernel runs on one thread.
inline constexpr int64_t kJitParallelGrain = 32768;
/// Longest reduced row a reduction kernel keeps resident (persistent); longer
/// rows are looped and recompute what later loops need.
inline constexpr int64_t kPersistentRow = 8192;
/// CUDA: threads per block of pointwise kernels and of reductions whose rows
/// take one thread each.
inline constexpr int kCudaBlock = 256;
/// CUDA: most threads of a block (every GPU smelt supports).
inline constexpr int kCudaMaxBlock = 1024;
/// CUDA: most element positions one block covers in a pass (threads x
/// items_per_thread). A kernel's last block forms positions up to this many
/// past the end before it checks them, which index_bits leaves room for.
inline constexpr int64_t kCudaMaxBlockSpan = 32768;
/// CUDA: most threads one row of a reduction takes (one block).
inline constexpr int kCudaRowThreads = 512;
/// CUDA: most steps of `vec` elements one thread holds of a persistent row
/// (longer rows are looped: 512 threads x 8 x 4 float32 = 16384 elements).
inline constexpr int kCudaRowIters = 8;
/// Most ops one kernel computes. The C++ compiler's time grows faster than
/// linearly with the length of a function (g++ -O3: ~0.04 ms per statement up
/// to a few hundred, ~0.2 ms each at 4,000 and more beyond), so a longer
/// chain of inlined producers is cut: a buffer in it is materialized and the
/// chain continues in another kernel, which costs one store and load per
/// element every kMaxKernelOps ops.
inline constexpr int64_t kMaxKernelOps = 256;
/// Most stores and reductions one kernel has (Inductor's max_fusion_size):
/// the compiler's dependence analysis of a loop grows with the square of the
/// memory references in it, and so does the legality check of a group whose
/// stores read each other.
inline constexpr int64_t kMaxKernelOutputs = 64;
/// Most rows a scan kernel scans together (KernelConfig::scan_lanes).
inline constexpr int64_t kScanLanes = 1024;
/// Iterations a parallel CPU pointwise kernel's loop keeps for its threads
/// where it can (KernelConfig::column_blocks), and the fewest columns a block
/// of a row keeps (a vectorized run).
inline constexpr int64_t kPointwiseParallelBlocks = 64;
inline constexpr int64_t kMinBlockColumns = 64;
/// Most and fewest outputs a CPU column reduction reduces side by side
/// (KernelConfig::column_lanes).
inline constexpr int64_t kColumnLanes = 64;
inline constexpr int64_t kMinColumnLanes = 8;

struct KernelConfig {
  Target target = Target::Cpp;
  bool reduction = false;
  /// Reduction: the group's reductions are scans (KernelGroup::scan); each row
  /// is walked in index order on one thread (never split).
  bool scan = false;
  /// Scan over a dim that has inner positions (not the innermost): this many
  /// rows (consecutive inner positions) are scanned together, one accumulator
  /// each, the inner loop running over them (contiguous, it vectorizes);
  /// 0: one row at a time.
  int64_t scan_lanes = 0;
  /// CPU reduction whose reductions all run in ColumnOrder (a kept dim is
  /// innermost in memory, e.g. sum over dim 0 of a matrix): this many
  /// neighbouring outputs (a divisor of the last dim, which is kept) are
  /// reduced side by side, the loop over them innermost (contiguous reads, it
  /// vectorizes; each output still folded in ColumnOrder); 0: one output at a time.
  int64_t column_lanes = 0;
  /// Pointwise: iterate rows x columns (loads broadcast along rows stay
  /// contiguous in the inner loop) instead of one flat range.
  bool tile_rows = false;
  /// CPU pointwise tile_rows kernel of few rows: each row is cut into this
  /// many equal blocks of columns (a divisor of the last dim), and the
  /// parallel loop runs over rows x blocks (a [4, 65536] kernel had 4
  /// iterations to share among the threads); 0: whole rows.
  int64_t column_blocks = 0;
  /// The outer range runs across threads (CPU: OpenMP; CUDA: the grid).
  bool parallel = false;
  /// Reduction: each row is split across threads, each with its own partial
  /// accumulator in a scratch buffer, combined in thread order (deterministic).
  bool split = false;
  /// Reduction: the row fits; values that several loops over the row need are
  /// kept in row buffers instead of being recomputed. Scan: one scan whose
  /// row fits, its computed element (prefill) and its consumers each in a loop
  /// of their own around the serial one.
  bool persistent = false;
  /// Reduction nodes whose element is computed (not a plain load): in a
  /// persistent kernel the row is computed in its own loop first, which
  /// vectorizes, then reduced.
  std::vector<int> prefill;
  /// float16/bfloat16 results of ops are rounded to their dtype inside the
  /// kernel, as eager stores them (off: kept in float32 registers).
  bool round_intermediates = true;
  /// Width of index arithmetic: 32 when every index the kernel forms fits.
  int index_bits = 64;
  /// CUDA: threads per block and elements per thread (0 on the CPU). A
  /// pointwise thread handles items_per_thread / vec vectors of `vec`
  /// elements, the block's threads side by side in each (coalesced).
  int block_size = 0;
  int items_per_thread = 0;
  /// CUDA: blocks launched (the grid; every kernel is a 1-D grid of 1-D blocks).
  int64_t grid = 0;
  /// CUDA: consecutive elements a thread handles at once; their loads and
  /// stores become 16-byte vector accesses where contiguity and alignment are
  /// proven (1: one element).
  int vec = 1;
  /// CUDA reduction: threads sharing one row (a power of two; their partial
  /// accumulators are combined with warp shuffles, then through shared memory
  /// across warps) and rows per block (block_size = threads_per_row *
  /// rows_per_block). 0 on the CPU and for scans (one thread per row).
  int threads_per_row = 0;
  int rows_per_block = 0;
  /// CUDA reduction: the threads of a row are strided along the rows (outer,
  /// column reductions: neighbouring threads read neighbouring outputs'
  /// elements) instead of along the row (inner).
  bool outer = false;
  /// CUDA persistent reduction: each thread's share of the row, in steps of
  /// `vec` elements (values several loops over the row need stay in registers).
  int row_iters = 0;

  /// CUDA pointwise: vectors of `vec` elements each thread handles (1 elsewhere).
  int vectors_per_thread() const {
    return !reduction && vec > 0 && items_per_thread > vec ? items_per_thread / vec : 1;
  }

  bool operator==(const KernelConfig& o) const;
  bool operator!=(const KernelConfig& o) const { return !(*this == o); }
  size_t hash() const;
  /// e.g. "cpp pointwise tile_rows parallel idx64".
  std::string str() const;
};

/// The heuristic: the config a kernel group gets on `target` (no autotuning),
/// from what the group reads and computes (`fp`: legality.h's footprint()).
KernelConfig choose_config(const Graph& g, const KernelGroup& group, const GroupFootprint& fp,
                           Target target, bool round_intermediates = true);

/// Most autotuning candidates of one kernel (candidate_configs).
inline constexpr size_t kMaxCandidates = 16;

/// The layouts mode "max-autotune" benchmarks for a kernel of `group` whose
/// heuristic config is `base` (choose_config's): `base` first, then distinct
/// CUDA layouts of the same kernel (vector width, index width and rounding
/// kept), at most kMaxCandidates in all, nearest to `base` first:
///  * pointwise: blocks of 128, 256, 512 or 1024 threads, 1, 2 or 4 vectors
///    per thread (a block spans at most kCudaMaxBlockSpan positions);
///  * scans: blocks of 64 to 512 threads (one thread per row);
///  * reductions: threads per row from a quarter to four times base's (powers
///    of two, at most one per step of the row), blocks of 128, 256 or 512
///    threads, the row persistent (in registers, when it fits in
///    kCudaRowIters steps) or looped. The CUDA layout splits a row across the
///    threads of one block only (never across blocks), so threads per row is
///    the split of a long row.
/// Every candidate is a layout the CUDA dialect prints correctly for the
/// group. CPU configs have no alternative: {base}.
std::vector<KernelConfig> candidate_configs(const KernelGroup& group, const KernelConfig& base);

}  // namespace smelt::compiler
