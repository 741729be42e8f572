// How a fused attention kernel reads scaled_dot_product_attention's attn_mask:
// the mask's data viewed as [B, H, L, S] through strides (0 on the dims it
// broadcasts over), shared by the CPU and CUDA backends' kernels
// (Backend::fused_attention).
#pragma once
#include <cstdint>

#include "core/tensor_impl.h"

namespace smelt::backend {

/// attn_mask as [B, H, L, S]: element (b, h, i, j) is at data + (b * stride[0]
/// + h * stride[1] + i * stride[2] + j * stride[3]) elements of `dtype`.
struct AttentionMaskView {
  const void* data = nullptr;
  DType dtype = DType::Bool;
  int64_t stride[4] = {};
};

/// The view of `mask` (on q's device, of rank at most 4, broadcastable to
/// [q.size(0), q.size(1), q.size(2), S] by PyTorch's rules: each of its dims,
/// aligned from the right, of size 1 or the target's) for q [B, H, L, E] and S
/// keys; false when the mask does not broadcast that way or lives
/// on another device. Any dtype: the kernel decides which it reads.
bool attention_mask_view(const Tensor& mask, const Tensor& q, int64_t S, AttentionMaskView& view);

}  // namespace smelt::backend
