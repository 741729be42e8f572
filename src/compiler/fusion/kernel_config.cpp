// KernelConfig's value semantics and the default heuristic that chooses one
// per kernel group (see kernel_config.h).
#include "compiler/fusion/kernel_config.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <set>

#include "compiler/fusion/legality.h"
#include "compiler/fusion/schedule.h"
#include "compiler/lower/loop_ir.h"
#include "core/tensor_impl.h"
#include "kernels/reduce_ops.h"

namespace smelt::compiler {

const char* target_name(Target t) { return t == Target::Cuda ? "cuda" : "cpp"; }

bool KernelConfig::operator==(const KernelConfig& o) const {
  return target == o.target && reduction == o.reduction && scan == o.scan &&
         scan_lanes == o.scan_lanes && column_lanes == o.column_lanes && tile_rows == o.tile_rows &&
         column_blocks == o.column_blocks && parallel == o.parallel && split == o.split &&
         persistent == o.persistent && prefill == o.prefill &&
         round_intermediates == o.round_intermediates && index_bits == o.index_bits &&
         block_size == o.block_size && items_per_thread == o.items_per_thread && grid == o.grid &&
         vec == o.vec && threads_per_row == o.threads_per_row &&
         rows_per_block == o.rows_per_block && outer == o.outer && row_iters == o.row_iters;
}

size_t KernelConfig::hash() const {
  size_t h = std::hash<std::string>{}(str());
  return h;
}

std::string KernelConfig::str() const {
  std::string s = fmt::format("{} {}", target_name(target),
                              scan ? "scan" : (reduction ? "reduction" : "pointwise"));
  if (tile_rows) s += " tile_rows";
  if (column_blocks) s += fmt::format(" column_blocks={}", column_blocks);
  if (parallel) s += " parallel";
  if (split) s += " split";
  if (persistent) s += " persistent";
  if (!prefill.empty()) s += fmt::format(" prefill={}", fmt::join(prefill, ","));
  if (scan_lanes) s += fmt::format(" lanes={}", scan_lanes);
  if (column_lanes) s += fmt::format(" column_lanes={}", column_lanes);
  if (!round_intermediates) s += " no_rounding";
  s += fmt::format(" idx{}", index_bits);
  if (block_size) s += fmt::format(" block={}x{} grid={}", block_size, items_per_thread, grid);
  if (vec > 1) s += fmt::format(" vec={}", vec);
  if (threads_per_row)
    s += fmt::format(" row={}{}x{}", outer ? "outer " : "", threads_per_row, rows_per_block);
  if (row_iters) s += fmt::format(" row_iters={}", row_iters);
  return s;
}

namespace {

/// 32-bit indexing is enough when every buffer the kernel touches and its
/// iteration space have fewer than 2^31 elements, less a margin for the
/// positions a thread forms past the end before it checks them (at most a
/// block of vectors).
int index_bits_for(const Graph& g, const std::vector<int>& buffers, int64_t numel) {
  int64_t most = numel;
  for (int b : buffers) most = std::max(most, g.buffers[b].extent);
  constexpr int64_t kMargin = int64_t{1} << 16;
  return most + kMargin < (int64_t{1} << 31) ? 32 : 64;
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

/// The smallest power of two >= n (n >= 1).
int64_t pow2_ceil(int64_t n) {
  int64_t p = 1;
  while (p < n) p *= 2;
  return p;
}

/// Elements of the narrowest dtype among `buffers` in 16 bytes (at most 8),
/// halved until it divides `n`: the vector width of a kernel over n elements.
int vector_width(const Graph& g, const std::vector<int>& buffers, int64_t n) {
  size_t narrowest = 8;
  for (int b : buffers) narrowest = std::min(narrowest, itemsize(g.buffers[b].dtype));
  int vec = static_cast<int>(std::min<size_t>(8, 16 / std::max<size_t>(1, narrowest)));
  while (vec > 1 && n % vec != 0) vec /= 2;
  return vec;
}

/// Rows (the kept positions) and row length (the reduced elements) of a
/// reduction group; an empty reduction still has its rows.
void row_extents(const KernelGroup& group, int64_t* rows, int64_t* rn) {
  const Shape& s = group.shape;
  *rn = 1;
  *rows = 1;
  for (size_t d = 0; d < s.size(); ++d)
    (std::find(group.rdims.begin(), group.rdims.end(), static_cast<int64_t>(d)) != group.rdims.end()
         ? *rn
         : *rows) *= s[d];
}

/// Steps of `vec` elements in a row of `rn` elements.
int64_t row_units(int64_t rn, int vec) { return ceil_div(std::max<int64_t>(1, rn), vec); }

/// A pointwise layout over `n` elements (c.vec set): blocks of `block`
/// threads, `vectors` vectors per thread.
void layout_pointwise(KernelConfig& c, int64_t n, int block, int vectors) {
  c.block_size = block;
  c.items_per_thread = c.vec * vectors;
  c.grid = std::max<int64_t>(1, ceil_div(n, int64_t{block} * c.items_per_thread));
}

/// A reduction layout (c.vec and c.outer set): `lanes` threads per row,
/// `rows_per_block` rows per block; the row persistent when asked and it fits
/// in kCudaRowIters steps per thread, else looped.
void layout_reduction(KernelConfig& c, int64_t rows, int64_t units, int lanes, int rows_per_block,
                      bool persistent) {
  c.threads_per_row = lanes;
  c.rows_per_block = rows_per_block;
  c.block_size = lanes * rows_per_block;
  const int64_t iters = ceil_div(units, lanes);
  c.persistent = persistent && iters <= kCudaRowIters;
  c.row_iters = c.persistent ? static_cast<int>(iters) : 0;
  c.items_per_thread = static_cast<int>(c.persistent ? iters * c.vec : c.vec);
  c.grid = std::max<int64_t>(1, ceil_div(rows, rows_per_block));
}

/// Ops whose float32 arithmetic (a tanh or erf polynomial per element) takes
/// longer than moving the element: a pointwise kernel computing one gives
/// each thread two vectors, so that one's loads overlap the other's math.
/// GPT-2's tanh-GELU, 8192 x 3072 bfloat16 on the H200: 39.5 us with one
/// vector of 8 per thread, 35.0 us with two (a copy: 26.9 us); same bits.
bool compute_heavy(const std::vector<std::string>& ops) {
  for (const std::string& op : ops)
    if (op == "gelu" || op == "gelu_tanh" || op == "erf" || op == "tanh") return true;
  return false;
}

/// Elements from which a compute-heavy pointwise kernel takes two vectors per
/// thread (below, more blocks fill the GPU better than more work per thread).
constexpr int64_t kCudaTwoVectorsFrom = int64_t{1} << 20;

/// The CUDA layout (index_bits already set). Pointwise: one thread per `vec`
/// consecutive elements (two vectors for compute-heavy ops on large tensors),
/// blocks of kCudaBlock threads. Scans: one thread per
/// row. Reductions: `threads_per_row` threads per row (a power of two),
/// `rows_per_block` rows per block; a row that fits in kCudaRowIters steps
/// per thread stays in registers (persistent), a longer one is looped.
KernelConfig cuda_config(const Graph& g, const KernelGroup& group, const std::vector<int>& touched,
                         const std::vector<std::string>& ops, KernelConfig c) {
  const Shape& s = group.shape;
  const int64_t n = detail::shape_numel(s);
  c.parallel = true;
  if (!group.reduction) {
    c.vec = vector_width(g, touched, n);
    layout_pointwise(c, n, kCudaBlock, compute_heavy(ops) && n >= kCudaTwoVectorsFrom ? 2 : 1);
    return c;
  }
  int64_t rn, rows;
  row_extents(group, &rows, &rn);
  if (group.scan) {
    c.scan = true;
    c.block_size = kCudaBlock;
    c.items_per_thread = 1;
    c.grid = std::max<int64_t>(1, ceil_div(rows, kCudaBlock));
    return c;
  }
  const ReductionInfo info = reduction_info(g, g.nodes[group.reductions[0]]);
  c.outer = info.order.column;
  // Inner rows read contiguous runs: `vec` elements per step where each run
  // divides into them (a row of several runs, batch_norm's N x H*W, steps
  // through them a vector at a time: CudaDialect::element_index).
  c.vec = !c.outer && info.order.contiguous && info.order.run > 0 && rn % info.order.run == 0
              ? vector_width(g, touched, info.order.run)
              : 1;
  const int64_t units = row_units(rn, c.vec);
  int64_t lanes;
  if (c.outer) {
    // Neighbouring threads take neighbouring rows (coalesced reads); many rows
    // keep one thread each, few rows share their elements among more threads.
    const int64_t across = std::min<int64_t>(32, pow2_ceil(std::max<int64_t>(1, rows)));
    lanes = rows >= 8192 ? 1 : std::min<int64_t>(kCudaBlock / across, pow2_ceil(units));
  } else {
    // About 4 steps per thread, at most kCudaRowThreads threads per row.
    lanes = std::clamp<int64_t>(pow2_ceil(ceil_div(units, 4)), 1, kCudaRowThreads);
    if (lanes < 4) lanes = 1;  // short rows: one thread each, rows side by side
  }
  // An inner row spanning several warps takes a block of its own: rows
  // sharing a block wait at each other's shared-memory combination
  // (layer_norm of 16384 x 4096 bfloat16 on the H200, 128-thread rows: two
  // per block 86.5 us, one 78.2). Outer rows stay interleaved in a block
  // (coalesced reads).
  const int64_t rows_per_block = !c.outer && lanes > 32 ? 1 : kCudaBlock / lanes;
  layout_reduction(c, rows, units, static_cast<int>(lanes), static_cast<int>(rows_per_block), true);
  return c;
}

/// True when a reduction of `group` reads, through any chain of nodes, the
/// result of another of its reductions: a second pass over the rows
/// (logsumexp's sum of exp(x - amax)).
bool chained_reductions(const Graph& g, const KernelGroup& group) {
  const std::set<int> reductions(group.reductions.begin(), group.reductions.end());
  for (int r : group.reductions) {
    std::vector<int> stack{r};
    std::set<int> seen{r};
    while (!stack.empty()) {
      const int n = stack.back();
      stack.pop_back();
      for (const Operand& in : g.nodes[static_cast<size_t>(n)].inputs) {
        if (in.buf < 0) continue;  // a scalar
        const Buffer& b = g.buffers[static_cast<size_t>(in.buf)];
        if (b.kind != BufferKind::Node) continue;
        if (reductions.count(b.producer) && b.producer != r) return true;
        if (seen.insert(b.producer).second) stack.push_back(b.producer);
      }
    }
  }
  return false;
}

/// KernelConfig::column_lanes of a CPU reduction group: the largest count
/// up to kColumnLanes (at least kMinColumnLanes) that divides the last dim,
/// where that dim is kept, every reduction folds in ColumnOrder and none is
/// indexed (argmax...), no reduction reads another's result (the lanes make
/// one pass over the rows), no store covers the whole domain (pointwise
/// consumers over the rows) and the rows are not empty (an empty reduction's
/// outputs are its identity, which the one-output-at-a-time kernel writes:
/// the lanes' loop over numel / rows outputs would write none); else 0.
/// Narrower lanes would give the threads more blocks, but cost more than they
/// give: a 256 x 1024 column sum in 64 blocks of 16 lanes took 0.205 ms on
/// one thread against 0.046 in 16 blocks of 64 (about 0.013 ms either way on
/// 16 threads); a column reduction of few blocks needs its rows cut instead.
int64_t column_lanes(const Graph& g, const KernelGroup& group) {
  const Shape& s = group.shape;
  if (s.empty() || group.rdims.empty() || group.reductions.empty()) return 0;
  for (int64_t d : group.rdims)
    if (s[static_cast<size_t>(d)] == 0) return 0;
  if (chained_reductions(g, group)) return 0;
  const int64_t last = static_cast<int64_t>(s.size()) - 1;
  if (std::find(group.rdims.begin(), group.rdims.end(), last) != group.rdims.end()) return 0;
  for (int node : group.reductions) {
    const ReductionInfo info = reduction_info(g, g.nodes[node]);
    if (!info.order.column || info.accumulator == "ArgMax" || info.accumulator == "ArgMin")
      return 0;
  }
  for (int st : group.stores)
    if (g.buffers[g.nodes[st].outputs[0]].sizes == s) return 0;
  int64_t lanes = std::min(s.back(), kColumnLanes);
  while (lanes > 1 && s.back() % lanes != 0) --lanes;
  return lanes >= kMinColumnLanes ? lanes : 0;
}

/// KernelConfig::column_blocks of a parallel pointwise kernel of `rows` rows
/// of `last` columns: where rows alone give fewer than
/// kPointwiseParallelBlocks iterations, the fewest blocks per row (a divisor
/// of `last` up to 4 kPointwiseParallelBlocks, each at least kMinBlockColumns
/// columns) that give that many; 0 where rows suffice or no such divisor exists.
int64_t column_blocks(int64_t rows, int64_t last) {
  if (rows >= kPointwiseParallelBlocks) return 0;
  for (int64_t b = ceil_div(kPointwiseParallelBlocks, rows); b <= 4 * kPointwiseParallelBlocks;
       ++b) {
    if (last / b < kMinBlockColumns) break;
    if (last % b == 0) return b;
  }
  return 0;
}

}  // namespace

KernelConfig choose_config(const Graph& g, const KernelGroup& group, const GroupFootprint& fp,
                           Target target, bool round_intermediates) {
  KernelConfig c;
  c.target = target;
  c.round_intermediates = round_intermediates;
  c.reduction = group.reduction;
  const Shape& s = group.shape;
  const int64_t n = detail::shape_numel(s);
  std::vector<int> touched = fp.reads;
  for (int st : group.stores) touched.push_back(g.nodes[st].outputs[0]);
  // The CPU indexes with int64_t (loops over 64-bit counters vectorize as
  // well); the GPU uses 32-bit arithmetic when bounds allow.
  c.index_bits = target == Target::Cuda ? index_bits_for(g, touched, n) : 64;
  if (target == Target::Cuda) return cuda_config(g, group, touched, fp.ops, c);
  if (!group.reduction) {
    const int64_t last = s.empty() ? 1 : s.back();
    const int64_t rows = last > 0 ? n / last : 0;
    c.tile_rows = s.size() >= 2 && last >= 16 && rows >= 2;
    c.parallel = n >= kJitParallelGrain;
    if (c.tile_rows && c.parallel) c.column_blocks = column_blocks(rows, last);
    return c;
  }
  int64_t rn = 1;
  for (auto d : group.rdims) rn *= s[d];
  const int64_t outer = rn > 0 ? n / rn : 0;
  if (group.scan) {
    // A row's steps depend on each other: rows spread over threads, never
    // split (CUDA: one thread per row, a grid-stride loop over rows).
    c.scan = true;
    // Rows along inner positions are scanned side by side: the largest count
    // of them up to kScanLanes that divides the inner positions (a large scan
    // keeps about 16 groups of rows or more for the threads).
    int64_t inner = 1;
    if (!group.rdims.empty())
      for (size_t k = static_cast<size_t>(group.rdims[0]) + 1; k < s.size(); ++k) inner *= s[k];
    const int64_t most =
        n >= kJitParallelGrain ? std::clamp<int64_t>(outer / 16, 64, kScanLanes) : kScanLanes;
    int64_t lanes = std::min(inner, most);
    while (lanes > 1 && inner % lanes != 0) --lanes;
    c.scan_lanes = lanes > 1 ? lanes : 0;
    c.parallel = outer / std::max<int64_t>(1, c.scan_lanes) > 1 && n >= kJitParallelGrain;
    // One scan along rows that fit: its computed element and its consumers
    // get loops of their own over the row, which vectorize (row buffers).
    c.persistent = !c.scan_lanes && group.reductions.size() == 1 && !group.rdims.empty() &&
                   rn > 0 && rn <= kPersistentRow &&
                   (fp.computed_element[0] || !group.stores.empty());
    if (c.persistent && fp.computed_element[0]) c.prefill.push_back(group.reductions[0]);
    return c;
  }
  if ((c.column_lanes = column_lanes(g, group)) > 0) {
    c.parallel = outer / c.column_lanes > 1 && outer * rn >= kJitParallelGrain;
    return c;
  }
  c.split = reduce::splits_rows(outer, rn);
  c.parallel = !c.split && outer > 1 && outer * rn >= kJitParallelGrain;
  c.persistent = rn <= kPersistentRow;
  if (c.persistent && !c.split)
    for (size_t k = 0; k < group.reductions.size(); ++k)
      if (fp.computed_element[k]) c.prefill.push_back(group.reductions[k]);
  return c;
}

std::vector<KernelConfig> candidate_configs(const KernelGroup& group, const KernelConfig& base) {
  std::vector<KernelConfig> out{base};
  auto add = [&](const KernelConfig& c) {
    if (out.size() < kMaxCandidates && std::find(out.begin(), out.end(), c) == out.end())
      out.push_back(c);
  };
  if (base.target != Target::Cuda || base.block_size <= 0) return out;
  const int vec = std::max(1, base.vec);
  if (!group.reduction) {
    const int64_t n = detail::shape_numel(group.shape);
    for (int vectors : {1, 2, 4})
      for (int block : {256, 128, 512, 1024}) {
        // Later vectors of a thread would all lie past the end.
        if (int64_t{block} * vec * vectors > kCudaMaxBlockSpan ||
            (vectors > 1 && ceil_div(n, int64_t{block} * vec) < vectors))
          continue;
        KernelConfig c = base;
        layout_pointwise(c, n, block, vectors);
        add(c);
      }
    return out;
  }
  int64_t rn, rows;
  row_extents(group, &rows, &rn);
  if (group.scan) {
    for (int block : {256, 128, 512, 64}) {
      KernelConfig c = base;
      c.block_size = block;
      c.grid = std::max<int64_t>(1, ceil_div(rows, block));
      add(c);
    }
    return out;
  }
  const int64_t units = row_units(rn, vec);
  const int64_t most_lanes = std::min<int64_t>(kCudaMaxBlock, pow2_ceil(units));
  const int base_lanes = std::max(1, base.threads_per_row);
  for (int64_t lanes : {int64_t{base_lanes}, int64_t{base_lanes} / 2, int64_t{base_lanes} * 2,
                        int64_t{base_lanes} / 4, int64_t{base_lanes} * 4}) {
    if (lanes < 1 || lanes > most_lanes) continue;
    for (int block : {256, 128, 512}) {
      const int64_t per_block = std::max<int64_t>(1, block / lanes);
      for (bool persistent : {true, false}) {
        KernelConfig c = base;
        layout_reduction(c, rows, units, static_cast<int>(lanes), static_cast<int>(per_block),
                         persistent);
        add(c);
      }
    }
  }
  return out;
}

}  // namespace smelt::compiler
