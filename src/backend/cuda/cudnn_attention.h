// Scaled dot-product attention through cuDNN's fused flash-attention engine
// (cuDNN 9's graph API: one operation graph of matmul, scale, causal mask,
// softmax and matmul, which cuDNN's runtime fusion engine compiles into one
// kernel; on Hopper a wgmma / TMA kernel). cuDNN is loaded at run time
// (dlopen of libcudnn.so.9): smelt builds and runs without it, and the CUDA
// backend then uses its own kernel (attention.cu). SMELT_CUDNN=0 turns it off.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

#include "backend/cuda/kernels.h"

namespace smelt::cuda::impl {

/// Runs `a` (AttentionArgs of kernels.h: float16 / bfloat16 q, k, v and out,
/// no mask, a positive scale) with cuDNN on `stream` of device `device`; top-left causal when
/// `causal` (PyTorch's is_causal). Plans are built once per shape, strides and
/// dtype and cached. Returns false, having launched nothing, when cuDNN is
/// absent or turned off, or declines the problem (its engines' limits on
/// head dim, alignment and strides); the caller then runs its own kernel.
/// `device` must be the calling thread's current device (its cuDNN handle is
/// created there on first use); the data pointers 16-byte aligned and the
/// strides multiples of 8 elements (the tensors are declared so). Raises
/// smelt::OutOfMemoryError when cuDNN's workspace does not fit.
bool cudnn_attention(const AttentionArgs& a, DType dtype, bool causal, int device,
                     cudaStream_t stream);

/// True when libcudnn.so.9 (a version cudnn_version_usable takes) was loaded
/// and SMELT_CUDNN is not 0.
bool cudnn_attention_available();
/// True for the cuDNN versions (cudnnGetVersion: major * 10000 + minor * 100 +
/// patch) whose fused flash attention smelt uses: 9.10.2 and later. The
/// graph with -inf as the causal mask's value needs 9.10; 9.10.0 and 9.10.1
/// have known bugs in their float16 / bfloat16 attention forward pass
/// (cudnn-frontend's support check refuses them too).
bool cudnn_version_usable(int64_t version);
/// True when cuDNN is available and its flash-attention engine covers
/// `dtype` (float16 / bfloat16) and `head_dim` (a multiple of 8, at most 128).
bool cudnn_attention_supported(DType dtype, int64_t head_dim);
/// Keys from which cuDNN's kernel beats smelt's own where both run (H200,
/// 12 heads of 32 or 64, batch x keys = 8192: at 128 keys smelt's takes 11-28
/// us against cuDNN's 17-31, at 256 cuDNN's 26-29 against 28-41, at 1024
/// causal 50 against 91).
inline constexpr int64_t kCudnnAttentionMinKeys = 256;
/// Queries below which cuDNN is not asked (a plan is built per shape, and
/// decoding a token at a time would build one per sequence length).
inline constexpr int64_t kCudnnAttentionMinQueries = 16;
/// Turns cuDNN's attention off (false) or back on for this process, so that
/// tests and benchmarks can compare it with smelt's own kernel.
void set_cudnn_attention_enabled(bool on);
/// Attention calls cuDNN ran in this process (for tests and logs).
int64_t cudnn_attention_launches();
/// Why cuDNN last declined a problem (its shape and cuDNN's message), or "".
std::string cudnn_attention_last_decline();

}  // namespace smelt::cuda::impl
