// Device scratch memory for one host call (scratch.h).
#include "backend/cuda/scratch.h"

#include "backend/backend.h"
#include "backend/cuda/device.h"
#include "core/tensor_impl.h"

namespace smelt::cuda::impl {

void* Scratch::get(size_t bytes, const char* what) {
  const Device dev(DeviceType::CUDA, device_);
  held_.push_back(detail::make_empty({static_cast<int64_t>(bytes)}, DType::UInt8, dev, what));
  void* p = held_.back().data_ptr();
  // The allocator hands out blocks for the calling thread's current stream.
  if (stream_ != current_stream(device_))
    backend::backend(dev).record_stream(p, dev, backend::Stream{stream_});
  return p;
}

}  // namespace smelt::cuda::impl
