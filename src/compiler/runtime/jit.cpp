#include "compiler/runtime/jit.h"

#include <dlfcn.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#include "smelt/error.h"

namespace smelt::detail {
const std::map<std::string, std::string>& embedded_headers();
}

namespace smelt::compiler {

namespace {

std::atomic<int> g_invocations{0};

uint64_t fnv1a(const std::string& s, uint64_t h = 1469598103934665603ull) {
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

std::string read_file(const std::string& path, bool* ok = nullptr) {
  std::ifstream f(path, std::ios::binary);
  if (ok) *ok = static_cast<bool>(f);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

void write_atomic(const std::string& path, const std::string& data) {
  std::string tmp = fmt::format("{}.tmp.{}.{}", path, getpid(),
                                std::hash<std::thread::id>{}(std::this_thread::get_id()));
  {
    std::ofstream f(tmp, std::ios::binary);
    SMELT_CHECK(f, "smelt::compile: cannot write the kernel cache file {}", tmp);
    f << data;
  }
  SMELT_CHECK(std::rename(tmp.c_str(), path.c_str()) == 0, "smelt::compile: cannot rename {} to {}",
              tmp, path);
}

/// Runs `cmd` through the shell, returning its exit status and output.
int run_command(const std::string& cmd, std::string* output) {
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return -1;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) output->append(buf, n);
  int status = pclose(p);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string compiler() {
  const char* env = std::getenv("SMELT_CXX");
  return env && *env ? env : "g++";
}

const std::string& flags() {
  static const std::string f =
      "-O3 -march=native -ffp-contract=off -fopenmp -shared -fPIC -std=c++17 -w";
  return f;
}

std::string compiler_version() {
  static std::mutex m;
  static std::map<std::string, std::string> cache;
  std::lock_guard<std::mutex> lock(m);
  auto it = cache.find(compiler());
  if (it != cache.end()) return it->second;
  std::string out;
  int rc = run_command(compiler() + " --version", &out);
  if (rc != 0)
    throw Error(fmt::format(
        "smelt::compile: the C++ compiler '{}' was not found or does not run (exit {}: {}); "
        "install g++ (`make deps`) or set SMELT_CXX to a working compiler",
        compiler(), rc, out.substr(0, 200)));
  cache[compiler()] = out;
  return out;
}

std::string cpu_isa() {
  static const std::string isa = [] {
    std::ifstream f("/proc/cpuinfo");
    std::string line, model, fl;
    while (std::getline(f, line)) {
      if (model.empty() && line.rfind("model name", 0) == 0) model = line;
      if (fl.empty() && line.rfind("flags", 0) == 0) fl = line;
      if (!model.empty() && !fl.empty()) break;
    }
    return model + "|" + fl;
  }();
  return isa;
}

std::mutex& key_mutex(const std::string& key) {
  static std::mutex m;
  static std::map<std::string, std::unique_ptr<std::mutex>> locks;
  std::lock_guard<std::mutex> lock(m);
  auto& p = locks[key];
  if (!p) p = std::make_unique<std::mutex>();
  return *p;
}

std::string meta_of(const std::string& binary) {
  return fmt::format("size={} fnv={:016x}\n", binary.size(), fnv1a(binary));
}

}  // namespace

KernelLibrary::~KernelLibrary() {
  if (handle_) dlclose(handle_);
}

KernelLibrary::KernelFn KernelLibrary::kernel(const std::string& name) const {
  void* f = dlsym(handle_, name.c_str());
  SMELT_CHECK(f != nullptr, "smelt::compile: kernel {} is missing from {}", name, path_);
  return reinterpret_cast<KernelFn>(f);
}

std::string cache_dir() {
  std::string dir;
  if (const char* env = std::getenv("SMELT_CACHE_DIR"); env && *env) {
    dir = env;
  } else {
    const char* home = std::getenv("HOME");
    SMELT_CHECK(home && *home,
                "smelt::compile: neither SMELT_CACHE_DIR nor HOME is set; set "
                "SMELT_CACHE_DIR to a private directory for the kernel cache");
    dir = std::string(home) + "/.cache/smelt";
    ::mkdir((std::string(home) + "/.cache").c_str(), 0700);
  }
  ::mkdir(dir.c_str(), 0700);
  struct stat st {};
  SMELT_CHECK(::stat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode),
              "smelt::compile: cannot create the kernel cache directory {}", dir);
  SMELT_CHECK(st.st_uid == ::getuid(),
              "smelt::compile: the kernel cache {} belongs to another user; set SMELT_CACHE_DIR "
              "to a directory of your own",
              dir);
  if (st.st_mode & (S_IWGRP | S_IWOTH)) ::chmod(dir.c_str(), 0700);
  return dir;
}

std::string jit_prelude() {
  static const std::string prelude = [] {
    const auto& h = detail::embedded_headers();
    std::string out =
        "// smelt JIT translation unit\n#include <cmath>\n#include <cstdint>\n#include "
        "<limits>\n#include <type_traits>\n#include <vector>\n#include <omp.h>\n";
    for (const char* name : {"half.h", "scalar_ops.h", "reduce_ops.h"}) {
      auto it = h.find(name);
      SMELT_INTERNAL_ASSERT(it != h.end(), "embedded header {} missing", name);
      std::istringstream in(it->second);
      std::string line;
      out += fmt::format("// ---- {} (embedded) ----\n", name);
      while (std::getline(in, line)) {
        if (line.rfind("#include \"", 0) == 0 || line.rfind("#pragma once", 0) == 0) continue;
        out += line + "\n";
      }
    }
    return out;
  }();
  return prelude;
}

int compiler_invocations() { return g_invocations.load(); }

std::shared_ptr<KernelLibrary> build_library(const std::string& source, BuildInfo* info) {
  std::string version = compiler_version();
  uint64_t h = fnv1a(source);
  h = fnv1a(flags(), h);
  h = fnv1a(compiler() + "|" + version, h);
  h = fnv1a(cpu_isa(), h);
  h = fnv1a(SMELT_VERSION, h);
  std::string key = fmt::format("{:016x}", h);
  std::string dir = cache_dir();
  std::string base = dir + "/" + key;
  std::lock_guard<std::mutex> lock(key_mutex(key));
  BuildInfo local;
  BuildInfo& bi = info ? *info : local;
  bi.key = key;
  bi.source_path = base + ".cpp";

  auto try_load = [&]() -> std::shared_ptr<KernelLibrary> {
    bool ok_bin = false, ok_meta = false;
    std::string bin = read_file(base + ".so", &ok_bin);
    std::string meta = read_file(base + ".meta", &ok_meta);
    if (!ok_bin || !ok_meta || meta != meta_of(bin)) return nullptr;
    void* handle = dlopen((base + ".so").c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) return nullptr;
    return std::make_shared<KernelLibrary>(handle, base + ".so");
  };
  if (auto lib = try_load()) {
    bi.cache_hit = true;
    return lib;
  }
  write_atomic(base + ".cpp", source);
  std::string tmp = fmt::format("{}.so.tmp.{}.{}", base, getpid(),
                                std::hash<std::thread::id>{}(std::this_thread::get_id()));
  std::string cmd = fmt::format("{} {} -o '{}' '{}.cpp'", compiler(), flags(), tmp, base);
  std::string out;
  auto t0 = std::chrono::steady_clock::now();
  ++g_invocations;
  int rc = run_command(cmd, &out);
  bi.build_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (rc != 0) {
    std::remove(tmp.c_str());
    throw Error(
        fmt::format("smelt::compile: building generated code failed (exit {})\n  command: {}\n"
                    "  source: {}.cpp\n{}",
                    rc, cmd, base, out));
  }
  std::string bin = read_file(tmp);
  SMELT_CHECK(std::rename(tmp.c_str(), (base + ".so").c_str()) == 0,
              "smelt::compile: cannot move {} into the kernel cache", tmp);
  write_atomic(base + ".meta", meta_of(bin));
  auto lib = try_load();
  SMELT_CHECK(lib != nullptr, "smelt::compile: cannot load the freshly built {}.so: {}", base,
              dlerror() ? dlerror() : "unknown error");
  return lib;
}

}  // namespace smelt::compiler
