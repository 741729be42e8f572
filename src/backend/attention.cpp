// attn_mask geometry for fused attention kernels (attention.h).
#include "backend/attention.h"

namespace smelt::backend {

bool attention_mask_view(const Tensor& mask, const Tensor& q, int64_t S, AttentionMaskView& view) {
  if (q.dim() != 4 || mask.dim() > 4 || mask.device() != q.device()) return false;
  const int64_t want[4] = {q.size(0), q.size(1), q.size(2), S};
  const int64_t lead = 4 - mask.dim();
  for (int64_t d = 0; d < 4; ++d) {
    const int64_t md = d - lead;
    if (md < 0 || mask.size(md) == 1) {
      view.stride[d] = 0;
    } else if (mask.size(md) == want[d]) {
      view.stride[d] = mask.stride(md);
    } else {
      return false;
    }
  }
  view.data = mask.data_ptr();
  view.dtype = mask.dtype();
  return true;
}

}  // namespace smelt::backend
