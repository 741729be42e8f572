// NVRTC, device-free: the options generated CUDA code is compiled with and
// one compile of a source into a CUBIN or PTX. Nothing here needs a GPU or a
// driver (only the NVRTC library), so code generation can be checked on a
// machine without a GPU (`smelt bench --codegen-only`, the CudaCodegen tests);
// the toolchain (toolchain.h) builds and loads through the same functions.
#pragma once
#include <string>
#include <vector>

namespace smelt::cuda::impl {

/// NVRTC's version, e.g. "13.0".
std::string nvrtc_version();

/// The NVRTC options generated code is compiled with for compute capability
/// major.minor (also the fingerprint of its binaries): the architecture
/// (sm_XY for a CUBIN, compute_XY for PTX when NVRTC does not know the
/// device), C++17, no contraction into fused multiply-adds (each op rounds
/// by itself, as the CPU's kernels do); `*cubin` says which. Generated code
/// includes no header (the CUDA dialect's preamble brings what it needs).
/// Error when NVRTC knows no architecture at or below major.minor.
std::vector<std::string> nvrtc_options(int major, int minor, bool* cubin);

/// Compiles CUDA C++ `source` (called `name` in NVRTC's messages, e.g. its
/// path) with `options` into a CUBIN (`cubin`) or PTX (NUL-terminated, as the
/// driver wants it) and returns the image. Error with NVRTC's log, the options
/// and `name` when compilation fails.
std::string nvrtc_compile(const std::string& source, const std::string& name,
                          const std::vector<std::string>& options, bool cubin);

}  // namespace smelt::cuda::impl
