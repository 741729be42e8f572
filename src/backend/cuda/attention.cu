// Fused scaled dot-product attention for float16 / bfloat16 (Backend::
// fused_attention): softmax(q k^T * scale [causal]) v in one kernel, the
// scores never written to memory. The algorithm is FlashAttention-2's forward
// pass (Dao, "FlashAttention-2: Faster Attention with Better Parallelism and
// Work Partitioning", 2023): a block owns 64 query rows (one m16 tile per
// warp, four warps), walks the keys 64 at a time, keeps each row's running
// maximum and sum of exponentials in registers, rescales its float32 output
// accumulator when the maximum grows, and divides by the sum at the end.
// Exponentials are 2^(x * scale * log2(e) - max), one fused multiply-add and
// the hardware's approximate exp2 (FlashAttention-2's form).
//
// Products run on the tensor cores (mma.sync m16n8k16, float32 accumulate;
// PTX ISA "Warp-level matrix multiply-accumulate instructions"), fed by
// ldmatrix from shared memory. The scores are float32; the probabilities are
// rounded to the input dtype before the product with v, as sdpa's
// decomposition rounds them (ops/decompositions.cpp) and PyTorch's flash
// kernels do. The causal mask is top-left aligned (key j is masked for query
// i when j > i), PyTorch's is_causal. An attn_mask (any broadcast, read
// through its strides) either masks where it is false (bool) or is added to
// the scaled scores (float16 / bfloat16 / float32), as the decomposition's
// where / add; a row whose every score is -inf gives zeros under a mask or
// the causal triangle (PyTorch's _safe_softmax) and NaN without one
// (softmax's), there as here.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "backend/cuda/attention_mask.cuh"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/kernels.h"

namespace smelt::cuda::impl {

namespace {

constexpr int kThreads = 128;  // 4 warps
constexpr int kKeys = 64;      // keys per step
constexpr int kRows = 64;      // query rows per block: one m16 tile per warp
/// Blocks per SM the kernel is built for (__launch_bounds__): 4 without a
/// mask, which caps it at 128 registers (ptxas spills 40 bytes at head dim 64
/// causal, none otherwise), 3 with one (168 registers; 16-40 bytes spilled at
/// head dim 64). GPT-2's causal 8 x 12 x 1024 x 64 bfloat16 on the H200 (a
/// harness of this kernel): 90.3 us, against 93.4-96.3 us for two row tiles
/// per warp (q held in registers, 252 registers, 2 blocks per SM) and 100.1 us
/// for one without the bound; PyTorch's default, cuDNN's Hopper (wgmma)
/// kernel, 45.8 us.
template <bool MASKED>
inline constexpr int kMinBlocks = MASKED ? 3 : 4;

// d += a b for one m16n8k16 tile of TYPE (the PTX name of the operands' type).
#define SMELT_MMA_M16N8K16(TYPE)                                              \
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32." TYPE "." TYPE         \
               ".f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n" \
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])               \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1))

/// Tensor-core products and packing of the operand type T (__half or
/// __nv_bfloat16).
template <class T>
struct Mma {
  static __device__ void run(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    if constexpr (std::is_same_v<T, __half>)
      SMELT_MMA_M16N8K16("f16");
    else
      SMELT_MMA_M16N8K16("bf16");
  }
  /// Two floats rounded to T, lo in the low half.
  static __device__ uint32_t pack(float lo, float hi) {
    if constexpr (std::is_same_v<T, __half>) {
      __half2 v = __floats2half2_rn(lo, hi);
      return *reinterpret_cast<uint32_t*>(&v);
    } else {
      __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
      return *reinterpret_cast<uint32_t*>(&v);
    }
  }
};
#undef SMELT_MMA_M16N8K16

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* p) {
  const auto s = static_cast<uint32_t>(__cvta_generic_to_shared(p));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(s));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const void* p) {
  const auto s = static_cast<uint32_t>(__cvta_generic_to_shared(p));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(s));
}

/// Starts copying rows [row0, row0 + ROWS) of a [rows, D] matrix (row stride
/// `ld` elements, columns contiguous) into shared `dst` (row stride D + 8),
/// zeros past `rows`: 16-byte cp.async copies (PTX ISA "cp.async"), which
/// land while the block computes; cp_async_wait makes them visible.
template <class T, int D, int ROWS>
__device__ __forceinline__ void load_tile(T* dst, const T* src, int64_t ld, int row0, int rows) {
  constexpr int kChunks = D / 8;  // 16-byte chunks per row
  for (int c = threadIdx.x; c < ROWS * kChunks; c += kThreads) {
    const int r = c / kChunks, k = (c % kChunks) * 8;
    const bool in = row0 + r < rows;
    const T* from = in ? src + (row0 + r) * ld + k : src;  // 0 bytes read: zeros
    const auto to = static_cast<uint32_t>(__cvta_generic_to_shared(dst + r * (D + 8) + k));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(to), "l"(from),
                 "r"(in ? 16 : 0));
  }
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
/// Waits until at most N of this thread's committed copy groups are pending.
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

/// The mask's value for score (row, key) in the log2 domain of the scaled
/// scores: -inf where a bool mask is false, the additive mask times log2(e).
__device__ __forceinline__ float exp2_ftz(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

template <class T, int D, bool CAUSAL, bool MASKED>
__global__ void __launch_bounds__(kThreads, kMinBlocks<MASKED>)
    flash_attention_kernel(AttentionArgs a) {
  constexpr int kStride = D + 8;  // padded rows: ldmatrix reads hit distinct banks
  // Two stages of k and v: the next keys load while these compute. The q tile
  // stays in shared memory; each warp reads its fragments where it needs them
  // (held in registers they would cost 4 x D / 16 registers per thread).
  __shared__ __align__(16) T kv_s[4][kKeys * kStride];  // k0, v0, k1, v1
  __shared__ __align__(16) T q_s[kRows * kStride];
  // The longest causal blocks (the last query rows) start first.
  const int q_tile = CAUSAL ? static_cast<int>(gridDim.x - 1 - blockIdx.x) : blockIdx.x;
  const int row0 = q_tile * kRows;
  const int64_t bh = blockIdx.y, b = bh / a.heads, h = bh % a.heads;
  const T* q = static_cast<const T*>(a.q) + b * a.q_stride[0] + h * a.q_stride[1];
  const T* k = static_cast<const T*>(a.k) + b * a.k_stride[0] + h * a.k_stride[1];
  const T* v = static_cast<const T*>(a.v) + b * a.v_stride[0] + h * a.v_stride[1];
  T* out = static_cast<T*>(a.out) + b * a.o_stride[0] + h * a.o_stride[1];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int quad_row = lane / 4, quad_col = 2 * (lane % 4);

  const int key_end = CAUSAL ? min(a.S, row0 + kRows) : a.S;
  load_tile<T, D, kRows>(q_s, q, a.q_stride[2], row0, a.L);
  load_tile<T, D, kKeys>(kv_s[0], k, a.k_stride[2], 0, a.S);
  load_tile<T, D, kKeys>(kv_s[1], v, a.v_stride[2], 0, a.S);
  cp_async_commit();
  cp_async_wait<0>();
  __syncthreads();

  float o[D / 8][4];
#pragma unroll
  for (int j = 0; j < D / 8; ++j) o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.f;
  // Rows quad_row and quad_row + 8 of the tile: running max (of the scores
  // times scale * log2(e)) and running sum of exponentials.
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
  int my_row[2];
  // The mask rows of this thread's query rows (rows past L read row L - 1).
  const char* mask_row[2] = {};
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    my_row[half] = row0 + warp * 16 + quad_row + 8 * half;
    if constexpr (MASKED) mask_row[half] = mask_row_of(a, b, h, my_row[half]);
  }
  const float scale_log2 = a.scale * kLog2e;

  for (int key0 = 0, stage = 0; key0 < key_end; key0 += kKeys, stage ^= 1) {
    if (key0 + kKeys < key_end) {  // the next keys, into the other stage
      load_tile<T, D, kKeys>(kv_s[2 * (stage ^ 1)], k, a.k_stride[2], key0 + kKeys, a.S);
      load_tile<T, D, kKeys>(kv_s[2 * (stage ^ 1) + 1], v, a.v_stride[2], key0 + kKeys, a.S);
      cp_async_commit();
    }
    const T* ks = kv_s[2 * stage];
    const T* vs = kv_s[2 * stage + 1];
    // s = q k^T for the warp's 16 rows x 64 keys: 8 tiles of 8 keys.
    float s[kKeys / 8][4];
#pragma unroll
    for (int j = 0; j < kKeys / 8; ++j) s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.f;
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
#pragma unroll
      for (int j = 0; j < kKeys / 8; j += 2) {
        // Rows of the warp, columns 16kk..16kk+15, loaded again for each pair
        // of key tiles: held across them, the fragment spills at head dim 64
        // under the 128-register bound.
        uint32_t qa[4];
        ldmatrix_x4(qa, q_s + (warp * 16 + lane % 16) * kStride + kk * 16 + (lane / 16) * 8);
        uint32_t kb[4];  // keys 8j..8j+15, columns 16kk..16kk+15
        ldmatrix_x4(kb, ks + (j * 8 + (lane & 7) + ((lane >> 4) << 3)) * kStride + kk * 16 +
                            ((lane >> 3) & 1) * 8);
        Mma<T>::run(s[j], qa, kb[0], kb[1]);
        Mma<T>::run(s[j + 1], qa, kb[2], kb[3]);
      }
    }
    // Mask (keys past S; causal; attn_mask) and the online softmax. Without
    // an attn_mask the scores stay unscaled: the maximum is scaled once, and
    // each exponent is one fused multiply-add x * scale - max (FlashAttention-
    // 2's form); with one, each score is scaled and its mask term added first.
    const bool edge = MASKED || key0 + kKeys > a.S || (CAUSAL && key0 + kKeys > row0);
    const float factor = MASKED ? 1.f : scale_log2;
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      float mx = -INFINITY;
#pragma unroll
      for (int j = 0; j < kKeys / 8; ++j)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          float& x = s[j][half * 2 + e];
          if (edge) {
            const int key = key0 + j * 8 + quad_col + e;
            if (key >= a.S || (CAUSAL && key > my_row[half]))
              x = -INFINITY;
            else if (MASKED)
              x = masked_score(a, x * scale_log2, mask_row[half], key);
          }
          mx = fmaxf(mx, x);
        }
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffff, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffff, mx, 2));
      mx = fmaxf(m[half], mx * factor);
      // A row with every key so far masked keeps max -inf: exponentials of 0.
      const float base = mx == -INFINITY ? 0.f : mx;
      const float rescale = exp2_ftz(m[half] - base);
      float sum = 0.f;
#pragma unroll
      for (int j = 0; j < kKeys / 8; ++j)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          float& x = s[j][half * 2 + e];
          x = exp2_ftz(fmaf(x, factor, -base));
          sum += x;
        }
      l[half] = l[half] * rescale + sum;
      m[half] = mx;
#pragma unroll
      for (int j = 0; j < D / 8; ++j) {
        o[j][half * 2] *= rescale;
        o[j][half * 2 + 1] *= rescale;
      }
    }
    // o += p v: the probabilities (rounded to T) as A fragments straight from
    // the score accumulators, v through transposing loads.
#pragma unroll
    for (int kk = 0; kk < kKeys / 16; ++kk) {
      uint32_t pa[4];
      pa[0] = Mma<T>::pack(s[2 * kk][0], s[2 * kk][1]);
      pa[1] = Mma<T>::pack(s[2 * kk][2], s[2 * kk][3]);
      pa[2] = Mma<T>::pack(s[2 * kk + 1][0], s[2 * kk + 1][1]);
      pa[3] = Mma<T>::pack(s[2 * kk + 1][2], s[2 * kk + 1][3]);
#pragma unroll
      for (int j = 0; j < D / 8; j += 2) {
        uint32_t vb[4];  // keys 16kk..16kk+15, columns 8j..8j+15
        ldmatrix_x4_trans(vb, vs + (kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * kStride +
                                  j * 8 + (lane >> 4) * 8);
        Mma<T>::run(o[j], pa, vb[0], vb[1]);
        Mma<T>::run(o[j + 1], pa, vb[2], vb[3]);
      }
    }
    // The next stage has landed, and every warp is done with this one (the
    // step after next loads into it).
    cp_async_wait<0>();
    __syncthreads();
  }
  // The sums over the quad's four threads, then o / l rounded once.
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    float sum = l[half];
    sum += __shfl_xor_sync(0xffffffff, sum, 1);
    sum += __shfl_xor_sync(0xffffffff, sum, 2);
    const int row = my_row[half];
    if (row >= a.L) continue;
    const float inv = sum > 0.f ? 1.f / sum : empty_row_factor<(MASKED || CAUSAL)>();
    T* orow = out + row * a.o_stride[2];
#pragma unroll
    for (int j = 0; j < D / 8; ++j)
      *reinterpret_cast<uint32_t*>(orow + j * 8 + quad_col) =
          Mma<T>::pack(o[j][half * 2] * inv, o[j][half * 2 + 1] * inv);
  }
}

template <class T, int D, bool CAUSAL, bool MASKED>
void launch_kernel(const AttentionArgs& a, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>((a.L + kRows - 1) / kRows),
                  static_cast<unsigned>(a.batch * a.heads));
  flash_attention_kernel<T, D, CAUSAL, MASKED><<<grid, kThreads, 0, stream>>>(a);
}

template <class T, int D>
void launch_for(const AttentionArgs& a, bool causal, cudaStream_t stream) {
  const bool masked = a.mask_kind != AttentionMask::None;
  if (causal)
    masked ? launch_kernel<T, D, true, true>(a, stream)
           : launch_kernel<T, D, true, false>(a, stream);
  else
    masked ? launch_kernel<T, D, false, true>(a, stream)
           : launch_kernel<T, D, false, false>(a, stream);
}

}  // namespace

bool flash_attention_supported(DType dtype, int64_t head_dim) {
  return (dtype == DType::Float16 || dtype == DType::BFloat16) &&
         (head_dim == 32 || head_dim == 64);
}

void launch_flash_attention(const AttentionArgs& a, DType dtype, bool causal, cudaStream_t stream) {
  if (a.L == 0 || a.batch * a.heads == 0) return;
  const bool bf16 = dtype == DType::BFloat16;
  if (a.head_dim == 64) {
    bf16 ? launch_for<__nv_bfloat16, 64>(a, causal, stream)
         : launch_for<__half, 64>(a, causal, stream);
  } else {
    bf16 ? launch_for<__nv_bfloat16, 32>(a, causal, stream)
         : launch_for<__half, 32>(a, causal, stream);
  }
  SMELT_CUDA_CHECK_LAUNCH();
}

}  // namespace smelt::cuda::impl
