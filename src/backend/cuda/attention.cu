// Fused scaled dot-product attention for float16 / bfloat16 (Backend::
// fused_attention): softmax(q k^T * scale [causal]) v in one kernel, the
// scores never written to memory. The algorithm is FlashAttention-2's forward
// pass (Dao, "FlashAttention-2: Faster Attention with Better Parallelism and
// Work Partitioning", 2023): a block owns 128 query rows (two m16 tiles per
// warp, which share each k and v fragment loaded from shared memory: GPT-2's
// causal 8 x 12 x 1024 x 64 bfloat16 on the H200 100.2 -> 93.0 us against one
// tile per warp), walks the keys 64 at a time, keeps each row's running
// maximum and sum of exponentials in registers, rescales its float32 output
// accumulator when the maximum grows, and divides by the sum at the end.
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
// where / add; a row whose every key is masked gives zeros there as here
// (PyTorch's _safe_softmax).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/kernels.h"

namespace smelt::cuda::impl {

namespace {

constexpr int kThreads = 128;  // 4 warps
constexpr int kKeys = 64;      // keys per step

/// m16 row tiles per warp: two where the kernel then fits in 255 registers
/// without spilling and was measured faster (head dim 64, causal, no mask:
/// GPT-2), else one (with a mask or without the causal bound the scores of
/// two tiles spill at head dim 64).
template <int D, bool CAUSAL, bool MASKED>
inline constexpr int kTilesFor = D == 64 && CAUSAL && !MASKED ? 2 : 1;
/// Query rows per block.
template <int D, bool CAUSAL, bool MASKED>
inline constexpr int kRowsFor = 4 * 16 * kTilesFor<D, CAUSAL, MASKED>;

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
__device__ __forceinline__ float mask_term(const AttentionArgs& a, const char* row, int key) {
  const char* p = row + key * a.mask_stride[3] * a.mask_itemsize;
  switch (a.mask_kind) {
    case AttentionMask::Bool:
      return *reinterpret_cast<const bool*>(p) ? 0.f : -INFINITY;
    case AttentionMask::Float16:
      return __half2float(*reinterpret_cast<const __half*>(p)) * 1.4426950408889634f;
    case AttentionMask::BFloat16:
      return __bfloat162float(*reinterpret_cast<const __nv_bfloat16*>(p)) * 1.4426950408889634f;
    default:
      return *reinterpret_cast<const float*>(p) * 1.4426950408889634f;
  }
}

template <class T, int D, bool CAUSAL, bool MASKED>
__global__ void __launch_bounds__(kThreads) flash_attention_kernel(AttentionArgs a) {
  constexpr int kTiles = kTilesFor<D, CAUSAL, MASKED>;
  constexpr int kRows = kRowsFor<D, CAUSAL, MASKED>;
  constexpr int kStride = D + 8;  // padded rows: ldmatrix reads hit distinct banks
  // Two stages of k and v: the next keys load while these compute. The q
  // tile first lands in the second stage (2 x kKeys rows), which it leaves
  // once the warps hold it as fragments.
  __shared__ __align__(16) T kv_s[4][kKeys * kStride];  // k0, v0, k1, v1
  static_assert(2 * kKeys >= kRows);
  T* const q_s = kv_s[2];
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
  // This warp's rows (tile t: 16 rows from warp * 16 * kTiles + 16 t) as mma
  // A fragments, one per 16 columns of D.
  uint32_t qf[kTiles][D / 16][4];
#pragma unroll
  for (int t = 0; t < kTiles; ++t)
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk)
      ldmatrix_x4(qf[t][kk], q_s + ((warp * kTiles + t) * 16 + lane % 16) * kStride + kk * 16 +
                                 (lane / 16) * 8);
  __syncthreads();  // q_s is the second stage, which the first step loads into

  float o[kTiles][D / 8][4];
  // Rows quad_row and quad_row + 8 of each tile: running max (of the scores
  // times scale * log2(e)) and running sum of exponentials.
  float m[kTiles][2], l[kTiles][2];
  int my_row[kTiles][2];
  // The mask rows of this thread's query rows (rows past L read row L - 1).
  const char* mask_row[kTiles][2] = {};
#pragma unroll
  for (int t = 0; t < kTiles; ++t) {
#pragma unroll
    for (int j = 0; j < D / 8; ++j) o[t][j][0] = o[t][j][1] = o[t][j][2] = o[t][j][3] = 0.f;
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      m[t][half] = -INFINITY;
      l[t][half] = 0.f;
      my_row[t][half] = row0 + (warp * kTiles + t) * 16 + quad_row + 8 * half;
      if constexpr (MASKED)
        mask_row[t][half] =
            static_cast<const char*>(a.mask) + (b * a.mask_stride[0] + h * a.mask_stride[1] +
                                                min(my_row[t][half], a.L - 1) * a.mask_stride[2]) *
                                                   a.mask_itemsize;
    }
  }
  const float scale_log2 = a.scale * 1.4426950408889634f;

  for (int key0 = 0, stage = 0; key0 < key_end; key0 += kKeys, stage ^= 1) {
    if (key0 + kKeys < key_end) {  // the next keys, into the other stage
      load_tile<T, D, kKeys>(kv_s[2 * (stage ^ 1)], k, a.k_stride[2], key0 + kKeys, a.S);
      load_tile<T, D, kKeys>(kv_s[2 * (stage ^ 1) + 1], v, a.v_stride[2], key0 + kKeys, a.S);
      cp_async_commit();
    }
    const T* ks = kv_s[2 * stage];
    const T* vs = kv_s[2 * stage + 1];
    // s = q k^T for each tile's 16 rows x 64 keys: 8 tiles of 8 keys; each k
    // fragment serves every row tile.
    float s[kTiles][kKeys / 8][4];
#pragma unroll
    for (int t = 0; t < kTiles; ++t)
#pragma unroll
      for (int j = 0; j < kKeys / 8; ++j) s[t][j][0] = s[t][j][1] = s[t][j][2] = s[t][j][3] = 0.f;
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
#pragma unroll
      for (int j = 0; j < kKeys / 8; j += 2) {
        uint32_t kb[4];  // keys 8j..8j+15, columns 16kk..16kk+15
        ldmatrix_x4(kb, ks + (j * 8 + (lane & 7) + ((lane >> 4) << 3)) * kStride + kk * 16 +
                            ((lane >> 3) & 1) * 8);
#pragma unroll
        for (int t = 0; t < kTiles; ++t) {
          Mma<T>::run(s[t][j], qf[t][kk], kb[0], kb[1]);
          Mma<T>::run(s[t][j + 1], qf[t][kk], kb[2], kb[3]);
        }
      }
    }
    // Scale, mask (keys past S; causal), and the online softmax.
    const bool edge = MASKED || key0 + kKeys > a.S || (CAUSAL && key0 + kKeys > row0);
#pragma unroll
    for (int t = 0; t < kTiles; ++t)
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        float mx = m[t][half];
#pragma unroll
        for (int j = 0; j < kKeys / 8; ++j)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            float& x = s[t][j][half * 2 + e];
            x *= scale_log2;
            if (edge) {
              const int key = key0 + j * 8 + quad_col + e;
              if (key >= a.S || (CAUSAL && key > my_row[t][half]))
                x = -INFINITY;
              else if (MASKED)
                x += mask_term(a, mask_row[t][half], key);
            }
            mx = fmaxf(mx, x);
          }
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffff, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffff, mx, 2));
        // A row with every key so far masked keeps max -inf: exponentials of 0.
        const float base = mx == -INFINITY ? 0.f : mx;
        const float rescale = exp2f(m[t][half] - base);
        float sum = 0.f;
#pragma unroll
        for (int j = 0; j < kKeys / 8; ++j)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            float& x = s[t][j][half * 2 + e];
            x = exp2f(x - base);
            sum += x;
          }
        l[t][half] = l[t][half] * rescale + sum;
        m[t][half] = mx;
#pragma unroll
        for (int j = 0; j < D / 8; ++j) {
          o[t][j][half * 2] *= rescale;
          o[t][j][half * 2 + 1] *= rescale;
        }
      }
      // o += p v: the probabilities (rounded to T) as A fragments straight from
      // the score accumulators, v through transposing loads (each v fragment
      // serves every row tile).
#pragma unroll
    for (int kk = 0; kk < kKeys / 16; ++kk) {
      uint32_t pa[kTiles][4];
#pragma unroll
      for (int t = 0; t < kTiles; ++t) {
        pa[t][0] = Mma<T>::pack(s[t][2 * kk][0], s[t][2 * kk][1]);
        pa[t][1] = Mma<T>::pack(s[t][2 * kk][2], s[t][2 * kk][3]);
        pa[t][2] = Mma<T>::pack(s[t][2 * kk + 1][0], s[t][2 * kk + 1][1]);
        pa[t][3] = Mma<T>::pack(s[t][2 * kk + 1][2], s[t][2 * kk + 1][3]);
      }
#pragma unroll
      for (int j = 0; j < D / 8; j += 2) {
        uint32_t vb[4];  // keys 16kk..16kk+15, columns 8j..8j+15
        ldmatrix_x4_trans(vb, vs + (kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * kStride +
                                  j * 8 + (lane >> 4) * 8);
#pragma unroll
        for (int t = 0; t < kTiles; ++t) {
          Mma<T>::run(o[t][j], pa[t], vb[0], vb[1]);
          Mma<T>::run(o[t][j + 1], pa[t], vb[2], vb[3]);
        }
      }
    }
    // The next stage has landed, and every warp is done with this one (the
    // step after next loads into it).
    cp_async_wait<0>();
    __syncthreads();
  }
  // The sums over the quad's four threads, then o / l rounded once.
#pragma unroll
  for (int t = 0; t < kTiles; ++t)
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      float sum = l[t][half];
      sum += __shfl_xor_sync(0xffffffff, sum, 1);
      sum += __shfl_xor_sync(0xffffffff, sum, 2);
      const int row = my_row[t][half];
      if (row >= a.L) continue;
      // sum == 0: every key masked (the exponentials all 0): zeros, not 0 / 0.
      const float inv = sum > 0.f ? 1.f / sum : 0.f;
      T* orow = out + row * a.o_stride[2];
#pragma unroll
      for (int j = 0; j < D / 8; ++j)
        *reinterpret_cast<uint32_t*>(orow + j * 8 + quad_col) =
            Mma<T>::pack(o[t][j][half * 2] * inv, o[t][j][half * 2 + 1] * inv);
    }
}

template <class T, int D, bool CAUSAL, bool MASKED>
void launch_kernel(const AttentionArgs& a, cudaStream_t stream) {
  constexpr int kRows = kRowsFor<D, CAUSAL, MASKED>;
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
