// The CUDA toolchain: generated CUDA C++ compiled by NVRTC into a CUBIN for
// the current device's compute capability (PTX for the newest architecture
// NVRTC knows when the GPU is newer than that, which the driver then compiles),
// loaded and launched through the driver API. The driver is reached through
// the runtime's entry-point query (cudaGetDriverEntryPointByVersion), so
// libsmelt links no libcuda and loads on machines without a GPU driver.
// Modules are loaded with cuLibraryLoadData, cuModuleLoadData's
// context-independent form: one load serves every device (each device's
// context gets the code on its first launch there), and cuLaunchKernel takes
// the library's kernels directly. Where binaries are kept (key: the source's
// hash, NVRTC's version, the target architecture and the options; a private
// directory; verification; atomic publication) is the ModuleCache's business
// (src/compiler/runtime/kernel_cache.h), as on the CPU.
#pragma once
#include <cuda_runtime_api.h>

#include <memory>
#include <string>

#include "backend/backend.h"
#include "backend/cuda/nvrtc.h"  // nvrtc_options, nvrtc_compile

namespace smelt::cuda::impl {

/// Builds (or loads through `cache`) CUDA `source` for the current device into
/// a loaded module whose kernels are `extern "C" __global__` functions taking
/// one pointer per argument. Throws backend::ToolchainUnavailable when there
/// is no device or the driver lacks the entry points; Error (NVRTC's log, the
/// options and the source's path) when compilation fails.
std::shared_ptr<backend::Module> build_module(const std::string& source,
                                              backend::ModuleCache& cache,
                                              backend::BuildInfo* info);

/// Launches `kernel` (a handle of a module build_module returned) on `stream`
/// with `c.num_args` pointer arguments `args`; a grid of 0 blocks launches
/// nothing. Error when the launch fails.
void launch_kernel(backend::KernelHandle kernel, void* const* args, const backend::LaunchConfig& c,
                   cudaStream_t stream);

}  // namespace smelt::cuda::impl
