// Device scratch memory for one host call of the CUDA backend (packed GEMM
// operands, float32 products awaiting their epilogue, cuBLASLt workspaces):
// blocks of the caching allocator held until the Scratch is destroyed at the
// end of the call. Freeing them then is safe without synchronization: the
// allocator reuses a block only in the order of the stream it was allocated
// for, and a block used on another stream is declared with record_stream.
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>
#include <vector>

#include "smelt/tensor.h"

namespace smelt::cuda::impl {

class Scratch {
 public:
  /// Scratch for work queued on `stream` of CUDA device `device`.
  Scratch(int device, cudaStream_t stream) : device_(device), stream_(stream) {}
  /// `bytes` (> 0) of device memory, valid for `stream` until this Scratch dies.
  /// Raises smelt::OutOfMemoryError (naming `what`) when the device is full.
  void* get(size_t bytes, const char* what = "matmul");

 private:
  int device_;
  cudaStream_t stream_;
  std::vector<Tensor> held_;
};

}  // namespace smelt::cuda::impl
