// The backend interface: everything smelt asks of a device, in device-neutral
// terms. There is one Backend per DeviceType, registered by the backend itself
// (src/backend/cpu registers the CPU one); ops look it up by the device of their
// tensors, the compiler runtime by the device of its graph. The CUDA slot is
// filled by src/backend/cuda when smelt is built with CUDA (SMELT_CUDA);
// otherwise asking for it raises a smelt::Error.
//
// A backend provides
//  * devices: how many there are, the calling thread's current one;
//  * memory: its Allocator (core's Storage allocates through the same one, see
//    core/allocator.h) with its statistics, memset, device -> device, device
//    -> host and host -> device copies;
//  * streams and events: ordered queues of device work (no-ops on the CPU,
//    which runs everything synchronously on the calling thread);
//  * a toolchain: generated source -> a loadable Module (g++ + dlopen on the
//    CPU; NVRTC + the driver API on CUDA), built through the compiler
//    runtime's ModuleCache;
//  * launch: runs one kernel of a Module on its arguments (an array of
//    pointers, one per buffer or flag) with a LaunchConfig;
//  * graph capture: work recorded once and replayed in one launch (CUDA
//    graphs; none on the CPU);
//  * GEMM with a fused epilogue (bias, activation, residual add);
//  * the eager kernels the ops call, one call per op (never per element):
//    copy/cast, fill and factory fills, random fills, pointwise functors by
//    name, reductions, cumsum, arg-reductions, indexing, and the multi-tensor
//    optimizer steps (one call per tensor group).
//
// Every pointer a backend receives is device memory of its own device type.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/allocator.h"
#include "kernels/optim_ops.h"
#include "smelt/device.h"
#include "smelt/dtype.h"
#include "smelt/error.h"
#include "smelt/scalar.h"
#include "smelt/tensor.h"

namespace smelt::backend {

// ---------------------------------------------------------------- streams --

/// A queue of device work, executed in order. The null handle is the device's
/// default stream; the CPU has only that one (work runs on the calling thread).
struct Stream {
  void* handle = nullptr;
};

/// A point in a stream that another stream (or the host) can wait for.
struct Event {
  void* handle = nullptr;
};

/// What a device allocator holds (bytes; counts since the process started).
struct MemoryStats {
  int64_t allocated = 0;       // in live tensors (rounded to the allocator's size classes)
  int64_t reserved = 0;        // obtained from the device (allocated + cached)
  int64_t peak_allocated = 0;  // highest `allocated` since start or reset_peak_memory_stats
  int64_t peak_reserved = 0;   // highest `reserved` likewise
  int64_t device_allocs = 0;   // calls of the device's allocation function (cudaMalloc)
  int64_t device_frees = 0;    // calls of its release function (cudaFree)
  int64_t alloc_retries = 0;   // failed device allocations retried after freeing the cache
  int64_t ooms = 0;            // allocations that failed after the retry
};

// -------------------------------------------------------- toolchain, launch --

/// An entry point of a loaded Module: a host function pointer on the CPU
/// (void(void* const* args)), a CUfunction on CUDA. Opaque to callers.
struct KernelHandle {
  const void* fn = nullptr;
  explicit operator bool() const { return fn != nullptr; }
};

/// A built and loaded unit of generated code (a shared object on the CPU).
class Module {
 public:
  virtual ~Module() = default;
  /// The kernel `name`; throws smelt::Error when the module has none.
  virtual KernelHandle function(const std::string& name) const = 0;
  /// Where the binary lives (for messages).
  virtual const std::string& path() const = 0;
  /// Bytes of static shared memory kernel `name` uses on the current device
  /// (CUDA; 0 elsewhere), for the launch plan's log.
  virtual size_t static_shared_bytes(const std::string& name) const { return 0; }
};

/// How a build went (filled by Backend::build).
struct BuildInfo {
  bool cache_hit = false;   // loaded from the disk cache, no compiler run
  double build_ms = 0;      // compiler wall time (0 on a hit)
  std::string key;          // cache key
  std::string source_path;  // where the source is stored
};

/// The toolchain cannot run on this machine (no usable compiler, an unusable
/// cache directory, a compiler that hangs): compile() warns and runs eagerly.
class ToolchainUnavailable : public Error {
 public:
  using Error::Error;
};

/// The narrow interface through which a toolchain keeps its binaries: a
/// content-addressed store owned by the compiler runtime
/// (src/compiler/runtime/kernel_cache.h). The store keys entries by the source
/// and the toolchain's fingerprint, serializes concurrent builds of one key,
/// verifies a stored binary before loading it and publishes new ones
/// atomically; the toolchain only compiles a file and loads a file.
class ModuleCache {
 public:
  virtual ~ModuleCache() = default;
  /// Compiles the source file at `source_path` into a binary at `binary_path`;
  /// throws (smelt::Error with the command and its output, or
  /// ToolchainUnavailable) on failure.
  using CompileFn =
      std::function<void(const std::string& source_path, const std::string& binary_path)>;
  /// Loads the binary at `binary_path`; nullptr (and the reason in `*why`)
  /// when it cannot be loaded.
  using LoadFn =
      std::function<std::shared_ptr<Module>(const std::string& binary_path, std::string* why)>;
  /// The module for `source` built by the toolchain whose compiler, flags and
  /// target are summed up in `fingerprint`: loaded from the store when a
  /// verified binary is there, else compiled, stored and loaded. File names end
  /// in `source_ext` / `binary_ext` (".cpp", ".so"). Fills `info`.
  virtual std::shared_ptr<Module> get_or_build(const std::string& source,
                                               const std::string& fingerprint,
                                               const std::string& source_ext,
                                               const std::string& binary_ext,
                                               const CompileFn& compile, const LoadFn& load,
                                               BuildInfo* info) = 0;
};

/// Grid and block of a kernel launch (CUDA); the CPU ignores it (its kernels
/// parallelize themselves with OpenMP).
struct LaunchConfig {
  uint32_t grid[3] = {1, 1, 1};
  uint32_t block[3] = {1, 1, 1};
  size_t shared_mem_bytes = 0;
  /// Entries of the argument array (CUDA passes each one to the kernel).
  size_t num_args = 0;
};

// ---------------------------------------------------------- graph capture --

/// Device work recorded once and replayed in one launch (a CUDA graph). The
/// memory the work allocated while it was recorded (scratch of eager ops and
/// library calls) is the recording's own: it is neither handed to other work
/// nor returned to the device while the recording lives.
class CapturedWork {
 public:
  virtual ~CapturedWork() = default;
  /// Queues all of the recorded work on `stream` (in that stream's order).
  virtual void replay(Stream stream) = 0;
  /// Operations recorded (kernels, copies, memsets), for logs.
  virtual size_t nodes() const = 0;
  /// Bytes of device memory reserved for the work's own allocations.
  virtual int64_t private_bytes() const = 0;
};

/// A recording in progress (Backend::begin_capture). While it lives, the work
/// the calling thread queues on its device goes to stream(), which is the
/// thread's current stream there: that work is recorded, not run. A call that
/// cannot be recorded (waiting for the device, a copy to or from pageable
/// host memory) raises smelt::Error naming it; the recording is then useless.
/// Destroying it before finish() discards it and restores the current stream.
class Capture {
 public:
  virtual ~Capture() = default;
  virtual Stream stream() const = 0;
  /// Ends the recording (the thread's previous current stream is restored)
  /// and returns it, ready to replay; Error when the device refused it.
  virtual std::unique_ptr<CapturedWork> finish() = 0;
};

// ------------------------------------------------------------------- GEMM --

/// Where one operand of a batched matrix product lives: element (b, i, j) is at
/// data + b * batch_stride + i * row_stride + j * col_stride (in ELEMENTS; any
/// stride, zero and negative included).
struct MatrixRef {
  const void* data = nullptr;
  int64_t batch_stride = 0;
  int64_t row_stride = 0;
  int64_t col_stride = 0;
};

/// Which unchanging contents an operand holds, for a backend that keeps a
/// prepared copy (the CPU repacks a compiled plan's weights once into its GEMM
/// library's preferred layout): the Storage the operand lies in (its serial(),
/// never reused in a process) and that storage's version() when the call was
/// bound. An in-place write to the memory bumps the version, so a copy made
/// under another version is stale. `serial == 0`: unknown (an activation, or
/// memory the plan itself writes): nothing may be kept.
struct OperandIdentity {
  uint64_t serial = 0;
  uint32_t version = 0;
  bool known() const { return serial != 0; }
};

/// The epilogue activation, by epilogue_activation_name (src/kernels/gemm_epilogue.h):
/// "" (none), "relu", "gelu_erf", "gelu_tanh", "sigmoid", "silu", "tanh".
using GemmActivation = std::string;

/// What the fused GEMM applies where it writes its result, in this order:
///   C = activation(alpha * A @ B + bias) + residual
struct GemmEpilogue {
  /// [n] vector of the GEMM's dtype, contiguous (added to every row), or nullptr.
  const void* bias = nullptr;
  GemmActivation activation;
  /// m x n per batch, of the GEMM's dtype, with these strides (elements; 0 to
  /// broadcast), or nullptr. Never overlaps C (the backends write the product
  /// into C before they add the residual on some paths).
  const void* residual = nullptr;
  int64_t residual_batch_stride = 0;
  int64_t residual_row_stride = 0;
  int64_t residual_col_stride = 0;
  bool empty() const { return bias == nullptr && activation.empty() && residual == nullptr; }
};

/// One batched product C[b] = epilogue(alpha * A[b] @ B[b]) for b in [0, batch):
/// A[b] is m x k, B[b] is k x n, C[b] is m x n (strides in elements). All
/// operands have dtype `dtype` (any but bool; float16 / bfloat16 accumulate in
/// float32; integers wrap), except C when `out_dtype` is set. C may not alias
/// A or B.
struct Gemm {
  Device device;  // where the operands live (the GPU a CUDA backend runs on)
  DType dtype = DType::Float32;
  /// C's dtype when it is not `dtype`: only float32 for float16 / bfloat16
  /// operands and no epilogue (the float32 sums stored unrounded), on a
  /// backend that runs it (CUDA; the CPU backend raises an internal error).
  std::optional<DType> out_dtype;
  DType c_dtype() const { return out_dtype.value_or(dtype); }
  int64_t batch = 1, m = 0, n = 0, k = 0;
  MatrixRef a, b;
  void* c = nullptr;
  int64_t c_batch_stride = 0, c_row_stride = 0, c_col_stride = 1;
  GemmEpilogue epilogue;
  /// What B holds when it is a parameter or constant of a compiled plan (the
  /// CPU backend then reads a prepacked copy of it); unknown otherwise.
  OperandIdentity b_identity;
  double alpha = 1.0;
  /// The library algorithm to run: index k of the backend's proposals for
  /// this problem, best first (Backend::gemm_algorithm_count; max-autotune
  /// picks it); -1, or an index past the proposals, runs the backend's own
  /// choice. A backend without the choice ignores it.
  int algorithm = -1;
};

/// The element strides of one batch dim of a batched GEMM's operands (0 where
/// the operand is broadcast along it): A, B, C and the epilogue's residual.
struct GemmBatchDim {
  int64_t size = 1;
  int64_t a = 0, b = 0, c = 0, residual = 0;
};

// ---------------------------------------------------------- eager kernels --

/// Plain reductions over `dims` (see Backend::reduce).
enum class ReduceOp { Sum, Prod, Mean, Max, Min, Any, All };

/// A random fill from the counter-based Philox4x32-10 stream (core/random.h):
/// element i draws from the blocks `first_block + ...` of the stream keyed by
/// `seed`, as described by random_blocks(), so every device and thread count
/// produces the same numbers.
struct RandomFill {
  enum class Kind {
    Uniform,    // [0, 1) on the dtype's mantissa grid (floating out)
    Normal,     // standard normal, Box-Muller (floating out)
    Integer,    // low + (64 random bits mod range) (any out dtype)
    Bernoulli,  // true with probability p (bool out)
  };
  Kind kind = Kind::Uniform;
  uint64_t seed = 0;
  uint64_t first_block = 0;
  int64_t low = 0;     // Integer
  uint64_t range = 1;  // Integer: high - low (> 0)
  double p = 0.5;      // Bernoulli
};

/// Philox blocks (4 x 32 bits each) a fill of `numel` elements of `dtype` uses:
/// Uniform of <= 32-bit floats takes one word per element, Uniform float64,
/// Integer and Bernoulli two words, Normal one block per pair of elements.
uint64_t random_blocks(RandomFill::Kind kind, DType dtype, int64_t numel);

/// Random bits of a Uniform element of floating `dtype`: its mantissa digits
/// (11 float16, 8 bfloat16, 24 float32, 53 float64), so values stay below 1.
int uniform_bits(DType dtype);

// ---------------------------------------------------------------- Backend --

class Backend {
 public:
  virtual ~Backend() = default;
  virtual DeviceType type() const = 0;
  /// "cpu", "cuda" (the `<backend>` of kernel names uses its dialect instead).
  virtual const char* name() const = 0;

  // ---- devices ----
  /// Devices of this type on this machine (CPU: 1; CUDA: 0 where there is no
  /// GPU or driver, which is not an error).
  virtual int device_count() = 0;
  /// The calling thread's current device index (PyTorch's current device).
  virtual int current_device() { return 0; }
  /// Makes `index` the calling thread's current device; Error when out of range.
  virtual void set_device(int index) {}
  /// The model of `device`, for cache keys and logs ("NVIDIA H200, compute
  /// capability 9.0"; the backend's name where there is nothing more to say).
  virtual std::string device_name(Device device) { return name(); }

  // ---- memory ----
  /// Device memory (the same allocator core's Storage uses for this device).
  virtual Allocator& allocator() = 0;
  /// The allocator's statistics for `device` (all zero where it keeps none).
  virtual MemoryStats memory_stats(Device device) { return {}; }
  /// Resets the peaks of memory_stats to the current values.
  virtual void reset_peak_memory_stats(Device device) {}
  /// Returns the device memory the allocator caches but no tensor uses.
  virtual void empty_cache() {}
  /// Sets `nbytes` bytes at `dst` to `value` (in stream order).
  virtual void memset(void* dst, int value, size_t nbytes, Stream stream) = 0;
  /// Copies `nbytes` from `src` to `dst`, both device memory (they may
  /// overlap), in stream order.
  virtual void copy_on_device(void* dst, const void* src, size_t nbytes, Stream stream) = 0;
  /// Copies `nbytes` from device memory `src` to host memory `dst` and waits
  /// for it (a synchronization point).
  virtual void copy_to_host(void* dst, const void* src, size_t nbytes, Stream stream) = 0;
  /// Copies `nbytes` from pageable host memory `src` to device memory `dst` in
  /// stream order; `src` may be reused as soon as this returns (pinned memory
  /// goes through copy_from_pinned_async).
  virtual void copy_from_host(void* dst, const void* src, size_t nbytes, Stream stream) = 0;

  // ---- pinned host memory and stream-ordered lifetimes ----
  /// Page-locked host memory (torch's pinned memory) for asynchronous copies
  /// to and from this backend's devices, or nullptr where there is none (the
  /// CPU). Its blocks are not handed out again before the copies that used
  /// them have run.
  virtual Allocator* pinned_allocator() { return nullptr; }
  /// Queues a copy of `nbytes` from pinned host memory `src` (from
  /// pinned_allocator(); any address inside one of its blocks) to device
  /// memory `dst` on `stream` and returns at once.
  virtual void copy_from_pinned_async(void* dst, const void* src, size_t nbytes, Stream stream) {
    copy_from_host(dst, src, nbytes, stream);
  }
  /// Queues a copy of `nbytes` from device memory `src` to pinned host memory
  /// `dst` on `stream` and returns at once: `dst` holds the values once the
  /// stream has reached this point (synchronize, an event).
  virtual void copy_to_pinned_async(void* dst, const void* src, size_t nbytes, Stream stream) {
    copy_to_host(dst, src, nbytes, stream);
  }
  /// torch.Tensor.record_stream: device memory `p` (the start of a block of
  /// allocator()) is used by work queued on `stream`, which is not the stream
  /// it was allocated on; once freed, the block is reused only after the work
  /// queued on `stream` up to the free has run.
  virtual void record_stream(void* p, Device device, Stream stream) {}

  // ---- streams and events (CPU: no-ops) ----
  /// The calling thread's current stream on `device` (its default stream
  /// unless set_current_stream chose another).
  virtual Stream current_stream(Device device) = 0;
  /// Makes `stream` (of `device`) the calling thread's current stream there.
  virtual void set_current_stream(Device device, Stream stream) {}
  /// A new stream on `device` (CPU: the null stream); release with destroy_stream.
  virtual Stream create_stream(Device device) { return {}; }
  virtual void destroy_stream(Stream stream) {}
  /// A new event recorded on `stream`; release with destroy_event.
  virtual Event record_event(Stream stream) = 0;
  /// A new, unrecorded event (with timing: elapsed_ms works on it).
  virtual Event create_event(bool enable_timing) { return {}; }
  virtual void destroy_event(Event event) {}
  /// Records `event` at the current end of `stream`.
  virtual void record(Event event, Stream stream) {}
  /// Blocks the host until `event` has happened (an unrecorded one: at once).
  virtual void event_synchronize(Event event) {}
  /// True when `event` has happened (or was never recorded).
  virtual bool event_query(Event event) { return true; }
  /// Milliseconds between two recorded timing events (Error otherwise).
  virtual float elapsed_ms(Event start, Event end) { return 0.0f; }
  /// Work queued on `stream` after this call waits for `event`.
  virtual void wait_event(Stream stream, Event event) = 0;
  /// Blocks the host until everything queued on `stream` has run.
  virtual void synchronize(Stream stream) = 0;
  /// Blocks the host until all work on `device` (every stream) has run.
  virtual void synchronize_device(Device device) {}

  // ---- toolchain and launch ----
  /// Builds generated `source` (the backend's dialect, e.g. C++ for the CPU)
  /// into a loaded Module, through `cache` (a warm entry runs no compiler).
  /// Throws ToolchainUnavailable when the toolchain cannot run here, Error
  /// (with the command, its output and the source's path) when the build fails.
  virtual std::shared_ptr<Module> build(const std::string& source, ModuleCache& cache,
                                        BuildInfo* info) = 0;
  /// Runs `kernel` on `args` (device pointers in the order the generated
  /// signature reads them) in `stream`. The CPU runs it to completion here.
  virtual void launch(KernelHandle kernel, void* const* args, const LaunchConfig& config,
                      Stream stream) = 0;

  /// A flag of its own for one launch of generated code that may fail a
  /// runtime check: the kernel stores the check's code c > 0 (RuntimeCheck)
  /// there, and the backend raises `messages[c - 1]` as smelt::Error at its
  /// next synchronization point, so no call waits for the device to learn that
  /// nothing failed (and the launch can be recorded in a CUDA graph). nullptr
  /// where the backend has none (the CPU): the caller passes flags of its own
  /// and reads them after the launch.
  virtual int* deferred_error_flag(std::vector<std::string> messages) { return nullptr; }

  // ---- graph capture ----
  /// Starts recording the work the calling thread queues on `device` (see
  /// Capture); nullptr where the backend cannot record work (the CPU runs it
  /// as it is queued).
  virtual std::unique_ptr<Capture> begin_capture(Device device) { return nullptr; }

  // ---- GEMM ----
  /// True when the epilogue activation `act` can be fused into gemm().
  virtual bool gemm_epilogue_supported(const GemmActivation& act) const = 0;
  /// Runs `g` in `stream`. Throws smelt::Error for bool, an unknown activation,
  /// or an activation other than relu on an integer dtype.
  virtual void gemm(const Gemm& g, Stream stream) = 0;
  /// How many algorithms Gemm::algorithm may pick from for `g` (its library's
  /// proposals, best first), at most `most`; 0 where the backend has no
  /// choice (the CPU: oneDNN decides alone; CUDA: the problems cuBLASLt runs
  /// as one call, lt_gemm_of).
  virtual int gemm_algorithm_count(const Gemm& g, int most) { return 0; }
  /// False where gemm_algorithm_count is 0 for every GEMM (nothing to tune).
  virtual bool gemm_algorithms_tunable() const { return false; }

  // ---- eager kernels (inputs: any strides; outputs as documented) ----
  /// dst[i] = (dst dtype) src[i] with src broadcast to dst's shape; dst may be
  /// any non-overlapping strided view; src and dst may not overlap.
  virtual void copy(const Tensor& dst, const Tensor& src) = 0;
  /// Every element of dst (any strides) = v converted to dst's dtype as a
  /// C++/PyTorch cast does (float -> int truncates; out of range wraps as int64).
  virtual void fill(const Tensor& dst, const Scalar& v) = 0;
  /// out (contiguous, 1-D) [i] = start + i * step: in int64 (from the scalars'
  /// integer values) for an integer `out`, in double otherwise (bool: != 0),
  /// PyTorch's CPU accumulate types.
  virtual void arange(const Tensor& out, const Scalar& start, const Scalar& step) = 0;
  /// out (contiguous, 1-D, >= 2 elements): PyTorch's symmetric linspace from
  /// `start` to `end` (both endpoints exact).
  virtual void linspace(const Tensor& out, double start, double end) = 0;
  /// out (contiguous) filled from the Philox stream, see RandomFill.
  virtual void random(const Tensor& out, const RandomFill& fill) = 0;

  /// True when the pointwise functor `functor` (a function of namespace
  /// smelt::scalar, src/kernels/scalar_ops.h) has an eager kernel for compute
  /// dtype `compute`.
  virtual bool has_pointwise(const std::string& functor, DType compute) const = 0;
  /// out (contiguous) = scalar::<functor><C>(C(in_0), ..., C(in_k), C(extra)...)
  /// with broadcasting, C = opmath_type(compute), stored in out's dtype: the
  /// convention of ops/pointwise.h that generated code follows too. Internal
  /// error when has_pointwise() is false.
  virtual void pointwise(const std::string& functor, const std::vector<Scalar>& extra,
                         DType compute, const Tensor& out, const std::vector<Tensor>& inputs) = 0;
  /// pointwise() for an integer division (compute an integer dtype) whose
  /// divisor inputs[1] (on this device) must hold no zero, checked by the
  /// kernel itself so that the launch does not wait for the device: a zero
  /// sets the device's error flag, which the next synchronization point of
  /// that device (copy_to_host, synchronize, synchronize_device,
  /// event_synchronize) raises as smelt::Error(`message`); the output's values
  /// are then unspecified. Returns false, launching nothing, where the backend
  /// has no such check (the op then reads the divisor on the host first).
  virtual bool pointwise_checked_divisor(const std::string& functor,
                                         const std::vector<Scalar>& extra, DType compute,
                                         const Tensor& out, const std::vector<Tensor>& inputs,
                                         const std::string& message) {
    return false;
  }

  /// out (contiguous, the kept dims of x) = op over `dims` (sorted, distinct).
  /// Sum / Prod: x's dtype, or int64 from an integer x; Mean: x floating, out of
  /// x's dtype; Max / Min: out of x's dtype; Any / All: out bool or uint8.
  virtual void reduce(ReduceOp op, const Tensor& x, const std::vector<int64_t>& dims,
                      const Tensor& out) = 0;
  /// max/min with indices, argmax/argmin (row-major index over `dims`);
  /// `values` may be undefined; indices int64.
  virtual void arg_reduce(const Tensor& x, const std::vector<int64_t>& dims, const Tensor& values,
                          const Tensor& indices, bool is_max) = 0;
  /// var (std when `take_sqrt`) with `correction` and, when defined, mean
  /// (Welford in double); x floating, outputs of x's dtype.
  virtual void var(const Tensor& x, const std::vector<int64_t>& dims, double correction,
                   bool take_sqrt, const Tensor& var, const Tensor& mean) = 0;
  /// Inclusive prefix sum along `dim` (out: x's shape, contiguous; x's dtype
  /// or int64 from an integer x).
  virtual void cumsum(const Tensor& x, int64_t dim, const Tensor& out) = 0;

  /// out (contiguous; x's shape with dim `dim` of size index.numel()) = x's
  /// slices index[k] along `dim`, k over index's elements in row-major order
  /// (index: int64 or int32, any shape, every value in range).
  virtual void index_select(const Tensor& out, const Tensor& x, int64_t dim,
                            const Tensor& index) = 0;
  /// out (contiguous, index's shape) [.., i_dim, ..] = x[.., index[..], ..]
  /// (index int64 or int32). Raises smelt::Error for an index value outside
  /// [0, x's size along dim) (the CPU names the first in element order; CUDA
  /// at the next synchronization).
  virtual void gather(const Tensor& out, const Tensor& x, int64_t dim, const Tensor& index) = 0;
  /// out (contiguous) [.., index[..], ..] += src[.., i_dim, ..] for every element of
  /// index (dim `dim`; src read through its strides, of out's dtype; index int64 or
  /// int32 of src's rank with sizes <= src's, values in range). Repeated indices add
  /// up, in index order.
  virtual void scatter_add(const Tensor& out, int64_t dim, const Tensor& index,
                           const Tensor& src) = 0;
  /// out (contiguous) rows index[j] along dim 0 = src rows j (src contiguous,
  /// [index.numel(), out.sizes()[1:]...], same dtype; index int64, in range).
  virtual void index_copy(const Tensor& out, const Tensor& index, const Tensor& src) = 0;
  // ---- fused kernels of composite ops (optional) ----
  // A composite op is defined once, by its decomposition (ops/decompositions.cpp);
  // run eagerly, the decomposition may hand a whole op to one of these kernels,
  // which compute the same formula with the same scalar functors in one pass
  // over memory. The CUDA kernels reassociate the row sums; the CPU ones give
  // the decomposition's values bit for bit (same reduction order) and take
  // float32 / float64 rows only (the decomposition then offers them the
  // float32 upcast of a float16 / bfloat16 x). They return false, writing
  // nothing, where the backend has none or the arguments fall outside what it
  // handles; the decomposition then runs op by op.

  /// softmax (log_softmax when `log`) of contiguous floating x over its last
  /// dim into out (fresh, x's shape and dtype): in opmath, shifted = x - max,
  /// exp(shifted) / sum (log: shifted - log(sum)), rounded once.
  virtual bool fused_softmax(const Tensor& x, bool log, const Tensor& out) { return false; }
  /// cat of `inputs` (each non-empty along `dim`, of out's sizes elsewhere)
  /// along `dim` into out (fresh) in one pass where the backend has one for
  /// them; false, with nothing written, otherwise: cat then copies each
  /// input into its slice of out.
  virtual bool cat(const Tensor& out, const std::vector<Tensor>& inputs, int64_t dim) {
    return false;
  }
  /// layer_norm of contiguous floating x over its last n elements into out
  /// (fresh, x's shape and dtype), as the decomposition: mean and biased
  /// variance accumulated in double and rounded to opmath, then
  /// (x - mean) * rsqrt(var + eps) [* weight] [+ bias] in opmath, rounded once;
  /// weight / bias contiguous [n] of x's dtype, or undefined.
  virtual bool fused_layer_norm(const Tensor& x, int64_t n, const Tensor& weight,
                                const Tensor& bias, double eps, const Tensor& out) {
    return false;
  }
  /// batch_norm's normalization of contiguous floating x [N, C, ...] (at least
  /// 3-D) with per-channel statistics into out (fresh, x's shape and dtype), as
  /// the decomposition: (x - mean[c]) * rsqrt(var[c] + eps) [* weight[c]]
  /// [+ bias[c]] in opmath, rounded once; mean / var contiguous [C] of
  /// opmath's dtype (float32 for float16 / bfloat16 x), weight / bias
  /// contiguous [C] of x's dtype, or undefined.
  virtual bool fused_batch_norm_apply(const Tensor& x, const Tensor& mean, const Tensor& var,
                                      const Tensor& weight, const Tensor& bias, double eps,
                                      const Tensor& out) {
    return false;
  }

  /// True when fused_attention has a kernel for q's `dtype` and `head_dim`,
  /// with an attn_mask when `masked` (it may still decline a call for its
  /// layout or mask). Pure: the compiler asks it while planning, with no
  /// tensor at hand.
  virtual bool has_fused_attention(DType dtype, int64_t head_dim, bool masked) const {
    return false;
  }
  /// scaled_dot_product_attention without dropout of q [B, H, L, E],
  /// k [B, H, S, E], v [B, H, S, Ev] of a dtype has_fused_attention takes
  /// (CUDA: float16 / bfloat16 / float32, E = Ev; CPU: float32) (any strides, the last
  /// dim contiguous) into out ([B, H, L, Ev], q's dtype: contiguous, or any
  /// view with its last dim contiguous the backend can write), with the
  /// decomposition's numerics: float32 scores, probabilities rounded to the
  /// dtype before the product with v, float32 sums rounded once (summed in
  /// another order). attn_mask: undefined, or broadcastable to [B, H, L, S],
  /// bool (false: masked) or floating (added to the scaled scores); a row
  /// whose every key is masked gives zeros (PyTorch's _safe_softmax). false
  /// where the backend has no kernel for the case.
  virtual bool fused_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                               const Tensor& attn_mask, bool is_causal, double scale,
                               const Tensor& out) {
    return false;
  }

  /// Zeroes, in every trailing matrix of out (contiguous), the elements above
  /// (lower = true: j - i > diagonal) or below (j - i < diagonal) the diagonal.
  virtual void triangle_zero(const Tensor& out, int64_t diagonal, bool lower) = 0;

  // ---- multi-tensor optimizer steps (PyTorch's foreach path: one kernel per group) ----
  // Every list holds one tensor per parameter; all tensors of a call are
  // contiguous, of one floating dtype, and tensor i of every list has the size of
  // params[i]. Each element is updated in place by the functor of
  // kernels/optim_ops.h, computing in float (float64 for float64).

  /// optim_ops::sgd over params[i], grads[i] and, when hyper.momentum != 0,
  /// momentum_buffers[i] (else empty).
  virtual void sgd_step(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                        const std::vector<Tensor>& momentum_buffers,
                        const optim_ops::SgdHyper& hyper) = 0;
  /// optim_ops::adam with hyper[i] for tensor i (step counts may differ);
  /// max_exp_avg_sqs is empty unless amsgrad.
  virtual void adam_step(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                         const std::vector<Tensor>& exp_avgs,
                         const std::vector<Tensor>& exp_avg_sqs,
                         const std::vector<Tensor>& max_exp_avg_sqs,
                         const std::vector<optim_ops::AdamHyper>& hyper) = 0;
};

/// Installs `b` (not owned, lives for the process) as the backend of its type.
void register_backend(Backend* b);

/// The backend of `type`. Throws smelt::Error when smelt has none for it
/// ("smelt was built without CUDA").
Backend& backend_for(DeviceType type);

/// The backend of `type`, or nullptr when smelt was built without it.
Backend* find_backend(DeviceType type);

/// torch.set_float32_matmul_precision: "highest" (float32 products in exact
/// float32, the default), "high" (TF32 tensor cores allowed) or "medium"
/// (treated as "high"). GEMM backends read it at each call.
void set_float32_matmul_precision(const std::string& precision);
std::string float32_matmul_precision();

/// The backend of `device`.
inline Backend& backend(Device device) { return backend_for(device.type); }

/// Runs C[i] = epilogue(A[i] @ B[i]) over every index i of the batch dims
/// `dims` (outermost first), whose strides need not combine into one:
/// attention's [batch, heads] products read Q, K and V through permuted views.
/// `g` is the product at index 0 (its batch and batch strides are ignored).
/// The innermost dims whose strides combine (for A, B, C and the residual)
/// become one batched Backend::gemm call, the outer ones a loop of such calls,
/// as ATen folds batch dims; when B is shared and A's and C's batches stack
/// into tall matrices, the whole batch is one (batch * m) x k product.
void gemm_over_batch(Backend& be, Gemm g, const std::vector<GemmBatchDim>& dims, Stream stream);
/// The first Backend::gemm call gemm_over_batch(be, g, dims, ...) makes
/// (every call it makes has that problem's shape and strides); nullopt when
/// it makes none (an empty batch).
std::optional<Gemm> first_gemm_over_batch(Gemm g, const std::vector<GemmBatchDim>& dims);
/// How many Backend::gemm calls gemm_over_batch(be, g, dims, ...) makes
/// (computed from the shapes and strides alone: g's pointers may be null).
int64_t gemm_calls_over_batch(const Gemm& g, const std::vector<GemmBatchDim>& dims);

/// Makes `device` the calling thread's current device of its backend for the
/// guard's lifetime (c10::DeviceGuard): work queued meanwhile (kernel builds,
/// launches) goes to it. No-op on the CPU.
class DeviceGuard {
 public:
  explicit DeviceGuard(Device device) : be_(backend(device)) {
    if (device.is_cpu()) return;
    prev_ = be_.current_device();
    if (prev_ != device.index) be_.set_device(device.index);
  }
  ~DeviceGuard() {
    if (prev_ >= 0 && prev_ != be_.current_device()) be_.set_device(prev_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  Backend& be_;
  int prev_ = -1;
};

}  // namespace smelt::backend
