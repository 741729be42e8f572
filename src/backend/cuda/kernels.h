// The CUDA backend's kernel launchers, as its host code (cuda_backend.cpp and
// the other .cpp files) calls them: plain pointers, geometries and dtypes
// (kernel_args.h). Each is defined in the .cu file named beside it and queues
// its kernels on `stream` (asynchronous; launch errors are checked).
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "backend/cuda/kernel_args.h"
#include "kernels/optim_ops.h"

namespace smelt::cuda::impl {

// ---- copy.cu ----
/// out (operand `out`, any strides) = scalar::cast<out dtype>(in[0]) with in[0]
/// broadcast: the converting copy behind Backend::copy.
void launch_copy(const PointwiseArgs& args);

// ---- fill.cu ----
/// Every element of `dst` (geometry `g`, any strides) = `value` cast to dst's dtype.
void launch_fill(const Geometry& g, const Operand& dst, const HostValue& value,
                 cudaStream_t stream);
/// arange / linspace into contiguous `out` of n elements (kernels/fill_ops.h).
void launch_arange(void* out, DType dtype, int64_t n, int64_t start_i, int64_t step_i,
                   double start_d, double step_d, cudaStream_t stream);
void launch_linspace(void* out, DType dtype, int64_t n, double start, double end,
                     cudaStream_t stream);

/// A random fill (backend::RandomFill, flattened).
struct RandomArgs {
  int kind = 0;  // 0 uniform, 1 normal, 2 integer, 3 Bernoulli (RandomFill::Kind's order)
  uint64_t seed = 0;
  uint64_t first_block = 0;
  int bits = 24;  // uniform: random bits per element
  int64_t low = 0;
  uint64_t range = 1;
  double p = 0.5;
};
/// Contiguous `out` of n elements from the Philox stream (kernels/random_ops.h).
void launch_random(void* out, DType dtype, int64_t n, const RandomArgs& args, cudaStream_t stream);

}  // namespace smelt::cuda::impl

namespace smelt::cuda::impl {

// ---- reduce_*.cu (reduce.cuh) ----

/// Which reduction (the accumulators of kernels/reduce_ops.h).
enum class ReduceKind { Sum, Prod, Mean, Max, Min, ArgMax, ArgMin, Var, Any, All };

/// A reduction over a strided input, flattened from reduce::ReduceGeom
/// (kernels/reduce_geom.h; strides in ELEMENTS): outputs are row-major over
/// the kept dims (the output tensors are contiguous), reduced elements
/// row-major over the reduced dims. `column` >= 0: that kept dim is innermost
/// in memory (outer schedule, threads along it); -1: inner schedule.
struct ReduceArgs {
  ReduceKind kind = ReduceKind::Sum;
  const char* x = nullptr;
  DType x_dtype = DType::Float32;
  int64_t n_out = 0, n_red = 0;
  int out_ndim = 0;
  int64_t out_sizes[kMaxDims] = {}, out_in_strides[kMaxDims] = {}, out_out_strides[kMaxDims] = {};
  int red_ndim = 0;
  int64_t red_sizes[kMaxDims] = {}, red_strides[kMaxDims] = {};
  int column = -1;
  char* out = nullptr;  // values (sum, mean, amax, var, any...)
  DType out_dtype = DType::Float32;
  char* out2 = nullptr;  // indices (int64) of arg reductions, mean of var_mean; may be null
  DType out2_dtype = DType::Int64;
  double correction = 1.0;  // var
  bool take_sqrt = false;   // var -> std
  int sm_count = 132;
  cudaStream_t stream = nullptr;
};

/// Scratch device memory for a launcher: alloc(ctx, bytes) returns memory
/// that stays valid for the kernels queued on the launcher's stream (the
/// caching allocator's stream-ordered reuse makes freeing it right after the
/// launch safe).
struct Workspace {
  void* (*alloc)(void* ctx, size_t bytes) = nullptr;
  void* ctx = nullptr;
};

/// Runs the reduction (reduce_sum.cu: Sum, Prod, Mean; reduce_minmax.cu: Max,
/// Min, ArgMax, ArgMin; reduce_other.cu: Var, Any, All). Rows too long for the
/// blocks of one output are split over several blocks whose partials a second
/// kernel combines in order (workspace from `ws`).
void launch_reduce_sum(const ReduceArgs& args, const Workspace& ws);
void launch_reduce_minmax(const ReduceArgs& args, const Workspace& ws);
void launch_reduce_other(const ReduceArgs& args, const Workspace& ws);

// ---- scan.cu ----
/// Inclusive prefix sum along one dim: `lines` lines of `len` elements; line l
/// (row-major over the other dims) starts at the offsets its index gives over
/// other_sizes; along the line x steps x_stride, out out_stride (elements).
/// Accumulates as the CPU (double for float32, kernels' acc_type otherwise).
struct ScanArgs {
  const char* x = nullptr;
  DType x_dtype = DType::Float32;
  char* out = nullptr;
  DType out_dtype = DType::Float32;
  int64_t len = 0, x_stride = 0, out_stride = 0;
  int64_t lines = 0;
  int other_ndim = 0;  // the other dims: sizes, x strides, out strides (elements)
  int64_t other_sizes[kMaxDims] = {}, other_x_strides[kMaxDims] = {},
          other_out_strides[kMaxDims] = {};
  cudaStream_t stream = nullptr;
};
void launch_cumsum(const ScanArgs& args);

}  // namespace smelt::cuda::impl

namespace smelt::cuda::impl {

// ---- index.cu ----

/// A gather: out (contiguous, `geom` = out's shape, row-major, unmerged) [e] =
/// the element of x at x_strides·coords(e) + index_value(e) * x_dim_stride,
/// where index_value(e) is read (int64 or int32) at index_strides·coords(e)
/// (gather), or at the flat position (e / inner) % n of a contiguous int64
/// index (index_select: inner = elements after `dim`, n = index.numel()).
/// Strides in bytes; elem = element size (the kernel moves bytes).
struct GatherArgs {
  Geometry geom;
  char* out = nullptr;
  const char* x = nullptr;
  int64_t x_strides[kMaxDims] = {};  // 0 along the gathered dim
  int64_t x_dim_stride = 0;
  const char* index = nullptr;
  DType index_dtype = DType::Int64;
  int64_t index_strides[kMaxDims] = {};  // gather only
  bool select = false;                   // index_select layout
  int64_t inner = 1, n = 1;              // index_select only
  int elem = 4;
  /// x's size along the gathered dim: an index outside [0, size) reads
  /// nothing and stores error_code in *error_flag (error_flag.h).
  int64_t size = 0;
  int* error_flag = nullptr;
  int error_code = 0;
  cudaStream_t stream = nullptr;
};
void launch_gather(const GatherArgs& args);

/// scatter_add (Backend::scatter_add): out[.., index[..], ..] += src[.., i, ..]
/// along one dim. `lines` is index's shape with that dim of size 1; each line
/// (one thread) walks the `len` positions of the dim in order, so repeated
/// indices add up in the CPU's order, without atomics (bitwise the CPU's
/// result). Strides in bytes; out is contiguous.
struct ScatterAddArgs {
  Geometry lines;
  int64_t out_strides[kMaxDims] = {}, src_strides[kMaxDims] = {}, index_strides[kMaxDims] = {};
  int64_t len = 0;
  int64_t out_dim_stride = 0, src_dim_stride = 0, index_dim_stride = 0;
  char* out = nullptr;
  const char* src = nullptr;
  DType dtype = DType::Float32;
  const char* index = nullptr;
  DType index_dtype = DType::Int64;
  /// out's size along the dim: an index outside [0, size) adds nothing and
  /// stores error_code in *error_flag (error_flag.h).
  int64_t size = 0;
  int* error_flag = nullptr;
  int error_code = 0;
  cudaStream_t stream = nullptr;
};
void launch_scatter_add(const ScatterAddArgs& args);

/// out rows index[j] (int64, contiguous) along dim 0 = src rows j: `rows`
/// rows of `row_bytes` bytes each, both contiguous.
void launch_index_copy(char* out, const char* src, const int64_t* index, int64_t rows,
                       int64_t row_bytes, int elem, cudaStream_t stream);

/// Zeroes, in every trailing rows x cols matrix of contiguous `out`, the
/// elements above (lower: j - i > diagonal) or below (j - i < diagonal) the
/// diagonal.
void launch_triangle_zero(char* out, int64_t numel, int64_t rows, int64_t cols, int64_t diagonal,
                          bool lower, int elem, cudaStream_t stream);

}  // namespace smelt::cuda::impl

namespace smelt::cuda::impl {

// ---- gemm.cu ----

/// A strided matrix operand (elements): element (b, i, j) at
/// data + b * bs + i * rs + j * cs.
struct MatArg {
  const void* data = nullptr;
  int64_t bs = 0, rs = 0, cs = 0;
};

/// The integer GEMM cuBLAS lacks: C[b] = alpha * A[b] @ B[b], products and
/// sums wrapping in the element type (computed modulo 2^64, as the CPU).
void launch_gemm_int(DType dtype, int64_t batch, int64_t m, int64_t n, int64_t k, MatArg a,
                     MatArg b, void* c, int64_t cbs, int64_t crs, int64_t ccs, int64_t alpha,
                     cudaStream_t stream);

/// The GEMM epilogue (kernels/gemm_epilogue.h): C = act(src + bias) + residual
/// for batch x m x n elements; src is float32 scratch (contiguous, for float16
/// / bfloat16 products: one rounding at the store) or C itself (src == null);
/// bias is [n] contiguous of C's dtype or null; residual strided or null.
void launch_gemm_epilogue(DType dtype, int64_t batch, int64_t m, int64_t n, const float* src,
                          void* c, int64_t cbs, int64_t crs, int64_t ccs, const void* bias,
                          int activation, const void* residual, int64_t rbs, int64_t rrs,
                          int64_t rcs, cudaStream_t stream);

/// Copies a batch x rows x cols strided matrix `src` (elements of `elem` bytes)
/// into `dst` with strides (dbs, drs, dcs) (elements).
void launch_matrix_copy(void* dst, int64_t dbs, int64_t drs, int64_t dcs, MatArg src, int64_t batch,
                        int64_t rows, int64_t cols, int elem, cudaStream_t stream);

}  // namespace smelt::cuda::impl

namespace smelt::cuda::impl {

// ---- norm.cu ----

/// softmax / log_softmax over the last dim: `rows` rows of `n` contiguous
/// elements of `dtype` (Backend::fused_softmax).
void launch_softmax(const void* x, void* out, DType dtype, int64_t rows, int64_t n, bool log,
                    cudaStream_t stream);
/// layer_norm over rows of n contiguous elements; weight / bias [n] or null
/// (Backend::fused_layer_norm).
void launch_layer_norm(const void* x, void* out, DType dtype, int64_t rows, int64_t n,
                       const void* weight, const void* bias, double eps, cudaStream_t stream);
/// batch_norm's normalization over `planes` = N * C contiguous planes of `hw`
/// elements, plane p of channel p % channels; mean / var [channels] in opmath,
/// weight / bias [channels] of `dtype` or null (Backend::fused_batch_norm_apply).
void launch_batch_norm_apply(const void* x, void* out, DType dtype, int64_t planes,
                             int64_t channels, int64_t hw, const void* mean, const void* var,
                             const void* weight, const void* bias, double eps, cudaStream_t stream);

// ---- attention.cu ----

/// softmax(q k^T * scale [causal]) v over `batch` x `heads` independent
/// problems: q [L, head_dim], k and v [S, head_dim], out [L, head_dim]. Strides
/// in elements for batch, head and sequence; the head dim is contiguous; every
/// pointer 16-byte aligned and every stride a multiple of 8.
/// How an attn_mask enters the scores: none, a bool mask (false: -inf), or
/// added (after the scale) from float16 / bfloat16 / float32 values.
enum class AttentionMask : int { None, Bool, Float16, BFloat16, Float32 };
struct AttentionArgs {
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  void* out = nullptr;
  int64_t batch = 0, heads = 0;
  int L = 0, S = 0, head_dim = 0;
  float scale = 1.f;
  int64_t q_stride[3] = {}, k_stride[3] = {}, v_stride[3] = {}, o_stride[3] = {};
  /// The mask as [B, H, L, S] (broadcast dims of stride 0), in elements.
  const void* mask = nullptr;
  AttentionMask mask_kind = AttentionMask::None;
  int64_t mask_itemsize = 0;
  int64_t mask_stride[4] = {};
};
/// The most blocks a grid's y (and z) dimension takes: the fused attention
/// kernels put batch x heads there, so larger problems are declined.
inline constexpr int64_t kMaxGridY = 65535;
/// True for the dtypes and head dims launch_flash_attention runs: float16 /
/// bfloat16, head_dim 32 or 64.
bool flash_attention_supported(DType dtype, int64_t head_dim);
/// FlashAttention-2's forward pass (attention.cu), S > 0.
void launch_flash_attention(const AttentionArgs& a, DType dtype, bool causal, cudaStream_t stream);

// ---- attention_f32.cu ----

/// True for what launch_attention_f32 runs: float32, head_dim 32 or 64.
bool attention_f32_supported(DType dtype, int64_t head_dim);
/// The float32 fused attention (online softmax on the CUDA cores), S > 0: any
/// scale, the mask kinds of AttentionArgs, causal top-left. Strides in
/// elements with the head dim contiguous; no alignment needed.
void launch_attention_f32(const AttentionArgs& a, bool causal, cudaStream_t stream);

}  // namespace smelt::cuda::impl

namespace smelt::cuda::impl {

// ---- optim.cu ----

/// One tensor of a multi-tensor optimizer step: the parameter, its gradient
/// and up to three state tensors (SGD: a = momentum buffer; Adam: a = exp_avg,
/// b = exp_avg_sq, c = max_exp_avg_sq), all contiguous, n elements of one
/// dtype. Unused state pointers are null.
struct OptimTensor {
  void* p = nullptr;
  const void* g = nullptr;
  void* a = nullptr;
  void* b = nullptr;
  void* c = nullptr;
  int64_t n = 0;
};
/// A run of elements [begin, begin + kOptimChunk) of tensor `tensor` (cut at its end).
struct OptimChunk {
  int64_t tensor = 0, begin = 0;
};
/// Elements per chunk: one block of the step kernel each.
inline constexpr int64_t kOptimChunk = 8192;

/// A group's tables in device memory, filled by the caller: one OptimTensor
/// per tensor and n_chunks chunks covering every element. One kernel launch
/// runs the whole group, each element updated by kernels/optim_ops.h's functor
/// in float (float64 for float64) as on the CPU, bitwise (optim.cu is compiled
/// without FMA contraction). Adam's hyperparameters are per tensor (device
/// memory, one per OptimTensor).
struct OptimArgs {
  DType dtype = DType::Float32;
  const OptimTensor* tensors = nullptr;
  const OptimChunk* chunks = nullptr;
  int64_t n_chunks = 0;
  cudaStream_t stream = nullptr;
};
void launch_sgd_step(const OptimArgs& args, const optim_ops::SgdHyper& hyper);
void launch_adam_step(const OptimArgs& args, const optim_ops::AdamHyper* hyper);

}  // namespace smelt::cuda::impl
