// The captured graph: buffers (graph inputs, module parameters/buffers,
// constants and node outputs) and op nodes over strided views of them.
//
// Views never make nodes: an operand is a (buffer, sizes, strides, offset)
// window, so permute / slice / expand / reshape-of-contiguous are index remaps
// from the start. Node outputs are fresh contiguous buffers.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "ops/dispatch.h"

namespace smelt::compiler {

enum class BufferKind {
  Input,     // a tensor argument of the compiled function
  Param,     // a module parameter or buffer (identity is guarded)
  Constant,  // a real tensor captured while tracing (created or closed over)
  Node,      // output of a graph node
};
const char* buffer_kind_name(BufferKind k);

struct Buffer {
  int id = -1;
  BufferKind kind = BufferKind::Node;
  DType dtype = DType::Float32;
  Device device;
  /// Elements reachable from the base pointer (node outputs: numel of `sizes`).
  int64_t extent = 0;
  Shape sizes;           // node outputs: the logical (contiguous) shape
  int producer = -1;     // node index for Node buffers
  int input_index = -1;  // argument / parameter index for Input / Param
  Tensor constant;       // Constant: the real tensor (keeps it alive); base = its storage data
  /// Constant: it existed before the trace (captured by the function from
  /// outside) rather than being created by it. Captured constants are read at
  /// every call (in-place updates are seen), so they are never folded.
  bool captured = false;
  /// Constant: the function writes into it (an optimizer's parameter or state,
  /// a .grad accumulated into): the graph writes its final value back into the
  /// tensor at every call (Graph::mutations), and nothing over it is folded.
  bool written = false;
  /// The base pointer is 16-byte aligned at every call: node outputs, parameters
  /// and constants (whole allocator blocks or arena slots) always; an input
  /// when its data pointer was when traced (a guard of smelt::compile checks
  /// it on CUDA, where generated code uses it for vector loads).
  bool aligned = true;
  std::string name() const;  // "buf3", "arg0", "param1", "const2"
};

/// A read of a buffer through a strided window, or an inline scalar (a C++
/// number given to an op).
struct Operand {
  int buf = -1;  // -1 for a scalar
  Shape sizes;
  Shape strides;
  int64_t offset = 0;
  DType dtype = DType::Float32;
  std::optional<Scalar> scalar;
  bool is_scalar() const { return scalar.has_value(); }
  bool same_as(const Operand& o) const;
  std::string str() const;
};

struct Node {
  std::string op;
  std::vector<Operand> inputs;
  detail::Attrs attrs;
  std::vector<int> outputs;  // buffer ids
};

struct Graph {
  std::vector<Buffer> buffers;
  std::vector<Node> nodes;
  std::vector<Operand> outputs;
  /// (input/param buffer, buffer holding its final value): written back after the run.
  std::vector<std::pair<int, int>> mutations;
  /// Storage serial at the start of the trace (see Storage::serial).
  uint64_t trace_serial = 0;
  int num_inputs = 0;
  int num_params = 0;

  int add_buffer(Buffer b);
  /// The device the graph runs on: the first GPU any buffer is on, else the
  /// CPU (smelt::compile runs a graph over several devices eagerly).
  Device device() const;
  /// True when every buffer is on device().
  bool on_one_device() const;
  /// Appends a node; creates its contiguous output buffers.
  int add_node(const std::string& op, std::vector<Operand> inputs, detail::Attrs attrs,
               const std::vector<detail::OutMeta>& outs);
  /// Number of times each buffer is read (nodes, outputs, mutations).
  std::vector<int> use_counts() const;
  /// Per buffer: read after the run, as a result or as the source of a
  /// write-back into an input or parameter.
  std::vector<bool> escaping() const;
  /// Human-readable listing, one node per line.
  std::string str() const;
  /// A 64-bit hash of everything lowering, fusion and code generation read:
  /// each buffer's kind, dtype, device, extent, sizes and argument index;
  /// each node's op, operands (windows, dtypes, exact scalar values),
  /// attributes and outputs; the outputs and write-backs. The data of
  /// constant tensors is not hashed: compiled code reads it at run time. One
  /// pass over the graph (the key of the plan cache, runtime/plan_cache.h).
  uint64_t hash() const;
};

/// Whether argument `arg`'s data pointer is 16-byte aligned, as far as code
/// generation cares: on CUDA the generated kernels use vector accesses on
/// aligned buffers (Buffer::aligned) and smelt::compile guards it; elsewhere
/// it is always true (CPU kernels do not depend on it, so no recompile).
bool input_aligned(const Tensor& arg);

/// Operand viewing buffer `b` whole and contiguous.
Operand whole(const Buffer& b);
/// True when `o` reads its buffer as one dense row-major block from offset 0.
bool is_whole_contiguous(const Operand& o, const Buffer& b);
/// `o`, a window of buffer `b` (dense row-major over b.sizes, element for
/// element the values `inner` reads, e.g. b is a convert of `inner`), as the
/// same window of inner's buffer with inner's dtype, when every dim of `o`
/// longer than 1 steps along one dim of `b` of its own (a permutation, slice or
/// broadcast-free selection of b's dims, such as a transpose); nullopt when a
/// dim of `o` mixes dims of `b` (a reshape across them) or inner's sizes are
/// not b's.
std::optional<Operand> window_through(const Operand& o, const Buffer& b, const Operand& inner);

}  // namespace smelt::compiler
