// NVRTC, device-free (see nvrtc.h): the options of generated code and one
// compile of a source into a CUBIN or PTX image.
#include "backend/cuda/nvrtc.h"

#include <fmt/format.h>
#include <nvrtc.h>

#include <algorithm>

#include "smelt/error.h"

namespace smelt::cuda::impl {

std::string nvrtc_version() {
  int major = 0, minor = 0;
  nvrtcVersion(&major, &minor);
  return fmt::format("{}.{}", major, minor);
}

std::vector<std::string> nvrtc_options(int major, int minor, bool* cubin) {
  int count = 0;
  nvrtcGetNumSupportedArchs(&count);
  std::vector<int> archs(static_cast<size_t>(std::max(0, count)));
  if (count > 0) nvrtcGetSupportedArchs(archs.data());
  const int want = major * 10 + minor;
  // A CUBIN for the device where NVRTC knows its architecture; else PTX of the
  // newest architecture NVRTC knows below it (the driver compiles it on load).
  *cubin = std::find(archs.begin(), archs.end(), want) != archs.end();
  int arch = want;
  if (!*cubin) {
    arch = 0;
    for (int a : archs)
      if (a <= want) arch = std::max(arch, a);
    SMELT_CHECK(arch > 0,
                "smelt::compile: NVRTC {} cannot compile for compute capability {}.{} (it knows "
                "architectures {})",
                nvrtc_version(), major, minor, fmt::join(archs, ", "));
  }
  // --minimal: none of the runtime API's device declarations the generated
  // code does not use (textures, surfaces...): a third less compile time.
  // 177/550: a value declared or set but not used (generated code names every
  // value; the unused ones cost nothing).
  return {fmt::format("--gpu-architecture={}_{}", *cubin ? "sm" : "compute", arch), "-std=c++17",
          "--fmad=false", "--minimal", "--diag-suppress=177,550"};
}

std::string nvrtc_compile(const std::string& source, const std::string& name,
                          const std::vector<std::string>& options, bool cubin) {
  nvrtcProgram prog = nullptr;
  nvrtcResult r = nvrtcCreateProgram(&prog, source.c_str(), name.c_str(), 0, nullptr, nullptr);
  SMELT_CHECK(r == NVRTC_SUCCESS, "smelt::compile: nvrtcCreateProgram failed: {}",
              nvrtcGetErrorString(r));
  std::vector<const char*> opts;
  for (auto& o : options) opts.push_back(o.c_str());
  r = nvrtcCompileProgram(prog, static_cast<int>(opts.size()), opts.data());
  size_t log_size = 0;
  nvrtcGetProgramLogSize(prog, &log_size);
  std::string log(log_size, '\0');
  if (log_size > 0) nvrtcGetProgramLog(prog, log.data());
  if (r != NVRTC_SUCCESS) {
    nvrtcDestroyProgram(&prog);
    throw Error(fmt::format(
        "smelt::compile: NVRTC {} failed to compile generated CUDA code ({})\n  options: {}\n  "
        "source: {}\n{}",
        nvrtc_version(), nvrtcGetErrorString(r), fmt::join(options, " "), name, log));
  }
  size_t size = 0;
  std::string binary;
  if (cubin) {
    nvrtcGetCUBINSize(prog, &size);
    binary.resize(size);
    nvrtcGetCUBIN(prog, binary.data());
  } else {
    nvrtcGetPTXSize(prog, &size);  // includes the terminating NUL the driver needs
    binary.resize(size);
    nvrtcGetPTX(prog, binary.data());
  }
  nvrtcDestroyProgram(&prog);
  return binary;
}

}  // namespace smelt::cuda::impl
