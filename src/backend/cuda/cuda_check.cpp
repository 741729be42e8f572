// The errors of failed CUDA runtime and cuBLAS calls (cuda_check.h).
#include "backend/cuda/cuda_check.h"

#include <fmt/format.h>

#include <cstring>

#include "smelt/error.h"

namespace smelt::cuda::impl {

namespace {
/// "src/backend/cuda/x.cpp" from an absolute __FILE__ (shorter messages).
const char* short_path(const char* file) {
  const char* p = std::strstr(file, "src/backend/");
  return p ? p : file;
}
}  // namespace

void throw_cuda_error(cudaError_t err, const char* call, const char* file, int line) {
  // Clears a non-sticky error so that the next call does not report it again.
  (void)cudaGetLastError();
  const std::string msg =
      fmt::format("CUDA error: {} failed: {} ({}): {} ({}:{})", call, cudaGetErrorName(err),
                  static_cast<int>(err), cudaGetErrorString(err), short_path(file), line);
  if (err == cudaErrorMemoryAllocation) throw OutOfMemoryError(msg);
  throw Error(msg);
}

void throw_internal_error(const char* what, const char* file, int line) {
  SMELT_INTERNAL_ASSERT(false, "CUDA backend: {} ({}:{})", what, short_path(file), line);
}

void throw_cublas_error(cublasStatus_t status, const char* call, const char* file, int line) {
  throw Error(fmt::format("cuBLAS error: {} failed: {} ({}): {} ({}:{})", call,
                          cublasGetStatusName(status), static_cast<int>(status),
                          cublasGetStatusString(status), short_path(file), line));
}

}  // namespace smelt::cuda::impl
