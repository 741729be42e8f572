// Checked CUDA runtime and cuBLAS calls. Every call the CUDA backend makes goes
// through SMELT_CUDA_CHECK / SMELT_CUBLAS_CHECK: a failure becomes a
// smelt::Error naming the call, the error's name and code, its message and
// where it was made, e.g.
//   "CUDA error: cudaMemcpyAsync(dst, src, n, kind, stream) failed:
//    cudaErrorInvalidValue (1): invalid argument (src/backend/cuda/copy.cpp:42)".
// Kernel launches are checked with SMELT_CUDA_CHECK(cudaGetLastError()) right
// after the launch. A sticky error (an illegal address in a kernel) leaves the
// CUDA context unusable; every other error leaves the process usable.
// This header has no fmt or smelt tensor types, so .cu files include it too.
#pragma once
#include <cublas_api.h>
#include <cuda_runtime_api.h>

namespace smelt::cuda::impl {

/// Throws the smelt::Error for a failed runtime call (see the file comment).
[[noreturn]] void throw_cuda_error(cudaError_t err, const char* call, const char* file, int line);
/// Throws the smelt::Error for a failed cuBLAS / cuBLASLt call.
[[noreturn]] void throw_cublas_error(cublasStatus_t status, const char* call, const char* file,
                                     int line);

/// Throws the smelt::Error of a broken invariant of the CUDA backend (a bug).
[[noreturn]] void throw_internal_error(const char* what, const char* file, int line);

inline void check(cudaError_t err, const char* call, const char* file, int line) {
  if (err != cudaSuccess) throw_cuda_error(err, call, file, line);
}
inline void check(cublasStatus_t status, const char* call, const char* file, int line) {
  if (status != CUBLAS_STATUS_SUCCESS) throw_cublas_error(status, call, file, line);
}

}  // namespace smelt::cuda::impl

/// Runs a CUDA runtime call; smelt::Error (call, code, message) when it fails.
#define SMELT_CUDA_CHECK(call) ::smelt::cuda::impl::check((call), #call, __FILE__, __LINE__)
/// Runs a cuBLAS / cuBLASLt call; smelt::Error (call, status, message) when it fails.
#define SMELT_CUBLAS_CHECK(call) ::smelt::cuda::impl::check((call), #call, __FILE__, __LINE__)
/// Checks the kernel launch just made (a bad configuration, no kernel image
/// for this GPU...).
#define SMELT_CUDA_CHECK_LAUNCH() SMELT_CUDA_CHECK(cudaGetLastError())
