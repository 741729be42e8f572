// The CUDA toolchain (see toolchain.h): the binaries' fingerprint, the
// driver entry points, loading a CUBIN/PTX image and launching its kernels.
#include "backend/cuda/toolchain.h"

#include <cuda.h>
#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <mutex>
#include <sstream>
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device.h"
#include "backend/cuda/nvrtc.h"
#include "backend/toolchain_files.h"
#include "smelt/error.h"

namespace smelt::cuda::impl {

namespace {

using backend::ToolchainUnavailable;

/// The driver functions generated code needs, from the runtime's entry-point
/// query (no link against libcuda).
struct Driver {
  decltype(&::cuLibraryLoadData) library_load_data = nullptr;
  decltype(&::cuLibraryUnload) library_unload = nullptr;
  decltype(&::cuLibraryGetKernel) library_get_kernel = nullptr;
  decltype(&::cuLaunchKernel) launch_kernel = nullptr;
  decltype(&::cuKernelGetAttribute) kernel_get_attribute = nullptr;
  decltype(&::cuGetErrorName) error_name = nullptr;
  decltype(&::cuGetErrorString) error_string = nullptr;
};

/// The driver's entry points (CUDA 12.0 signatures), looked up once; throws
/// ToolchainUnavailable when the driver does not have them.
const Driver& driver() {
  static const Driver d = [] {
    Driver r;
    auto get = [](const char* name, auto& fn) {
      void* p = nullptr;
      cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
      const cudaError_t err =
          cudaGetDriverEntryPointByVersion(name, &p, 12000, cudaEnableDefault, &q);
      if (err != cudaSuccess || q != cudaDriverEntryPointSuccess || p == nullptr) {
        (void)cudaGetLastError();
        throw ToolchainUnavailable(fmt::format(
            "the CUDA driver has no entry point {} (needs a driver for CUDA 12.0 or newer: {})",
            name, err != cudaSuccess ? cudaGetErrorString(err) : "symbol not found"));
      }
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(p);
    };
    get("cuLibraryLoadData", r.library_load_data);
    get("cuLibraryUnload", r.library_unload);
    get("cuLibraryGetKernel", r.library_get_kernel);
    get("cuLaunchKernel", r.launch_kernel);
    get("cuKernelGetAttribute", r.kernel_get_attribute);
    get("cuGetErrorName", r.error_name);
    get("cuGetErrorString", r.error_string);
    return r;
  }();
  return d;
}

std::string driver_error(CUresult r) {
  const char* name = nullptr;
  const char* what = nullptr;
  driver().error_name(r, &name);
  driver().error_string(r, &what);
  return fmt::format("{} ({}): {}", name ? name : "CUDA_ERROR_UNKNOWN", static_cast<int>(r),
                     what ? what : "unknown error");
}

void check_driver(CUresult r, const char* call) {
  SMELT_CHECK(r == CUDA_SUCCESS, "CUDA driver error: {} failed: {}", call, driver_error(r));
}

/// A loaded CUBIN or PTX image; its kernels are CUkernel handles (valid in
/// every context).
class CudaModule final : public backend::Module {
 public:
  CudaModule(CUlibrary lib, std::string path) : lib_(lib), path_(std::move(path)) {}
  ~CudaModule() override {
    if (lib_) driver().library_unload(lib_);
  }
  CudaModule(const CudaModule&) = delete;
  CudaModule& operator=(const CudaModule&) = delete;
  backend::KernelHandle function(const std::string& name) const override {
    CUkernel k = nullptr;
    const CUresult r = driver().library_get_kernel(&k, lib_, name.c_str());
    SMELT_CHECK(r == CUDA_SUCCESS && k != nullptr,
                "smelt::compile: kernel {} is missing from {} ({})", name, path_, driver_error(r));
    return backend::KernelHandle{k};
  }
  const std::string& path() const override { return path_; }
  size_t static_shared_bytes(const std::string& name) const override {
    int bytes = 0;
    const CUkernel k = static_cast<CUkernel>(const_cast<void*>(function(name).fn));
    if (driver().kernel_get_attribute(&bytes, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, k,
                                      static_cast<CUdevice>(current_device())) != CUDA_SUCCESS)
      return 0;
    return static_cast<size_t>(bytes);
  }

 private:
  CUlibrary lib_;
  std::string path_;
};

/// Compiles the source file at `source_path` into `binary_path` (CUBIN or PTX).
void compile(const std::vector<std::string>& options, bool cubin, const std::string& source_path,
             const std::string& binary_path) {
  bool ok = false;
  const std::string source = backend::read_file(source_path, &ok);
  SMELT_CHECK(ok, "smelt::compile: cannot read the generated source {}", source_path);
  const std::string binary = nvrtc_compile(source, source_path, options, cubin);
  std::ofstream out(binary_path, std::ios::binary);
  out.write(binary.data(), static_cast<std::streamsize>(binary.size()));
  SMELT_CHECK(static_cast<bool>(out), "smelt::compile: cannot write {}", binary_path);
}

}  // namespace

std::shared_ptr<backend::Module> build_module(const std::string& source,
                                              backend::ModuleCache& cache,
                                              backend::BuildInfo* info) {
  if (device_count() == 0)
    throw ToolchainUnavailable("no CUDA device: generated CUDA code cannot be loaded here");
  (void)driver();  // ToolchainUnavailable before any compile when the driver is too old
  const cudaDeviceProp& prop = properties(current_device());
  bool cubin = false;
  const std::vector<std::string> options = nvrtc_options(prop.major, prop.minor, &cubin);
  const std::string fingerprint = fmt::format("nvrtc {} | cc {}.{} | {}", nvrtc_version(),
                                              prop.major, prop.minor, fmt::join(options, " "));
  auto build = [&](const std::string& source_path, const std::string& binary_path) {
    compile(options, cubin, source_path, binary_path);
  };
  auto load = [](const std::string& binary_path,
                 std::string* why) -> std::shared_ptr<backend::Module> {
    bool ok = false;
    const std::string image = backend::read_file(binary_path, &ok);
    if (!ok || image.empty()) {
      if (why) *why = "cannot read the binary";
      return nullptr;
    }
    CUlibrary lib = nullptr;
    const CUresult r =
        driver().library_load_data(&lib, image.data(), nullptr, nullptr, 0, nullptr, nullptr, 0);
    if (r != CUDA_SUCCESS) {
      if (why) *why = driver_error(r);
      return nullptr;
    }
    return std::make_shared<CudaModule>(lib, binary_path);
  };
  return cache.get_or_build(source, fingerprint, ".cu", cubin ? ".cubin" : ".ptx", build, load,
                            info);
}

void launch_kernel(backend::KernelHandle kernel, void* const* args, const backend::LaunchConfig& c,
                   cudaStream_t stream) {
  if (c.grid[0] == 0 || c.grid[1] == 0 || c.grid[2] == 0) return;
  // cuLaunchKernel reads each argument through a pointer to it.
  constexpr size_t kInline = 32;
  void* inline_params[kInline];
  std::vector<void*> heap;
  void** params = inline_params;
  if (c.num_args > kInline) {
    heap.resize(c.num_args);
    params = heap.data();
  }
  for (size_t i = 0; i < c.num_args; ++i) params[i] = const_cast<void**>(&args[i]);
  CUfunction f = reinterpret_cast<CUfunction>(const_cast<void*>(kernel.fn));
  check_driver(driver().launch_kernel(f, c.grid[0], c.grid[1], c.grid[2], c.block[0], c.block[1],
                                      c.block[2], static_cast<unsigned>(c.shared_mem_bytes),
                                      reinterpret_cast<CUstream>(stream), params, nullptr),
               "cuLaunchKernel");
}

}  // namespace smelt::cuda::impl
