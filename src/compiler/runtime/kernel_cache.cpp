// The on-disk kernel cache (see kernel_cache.h): keys, the private directory,
// verification of stored binaries and their atomic publication.
#include "compiler/runtime/kernel_cache.h"

#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#include "smelt/error.h"

namespace smelt::compiler {

using backend::ToolchainUnavailable;

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

/// A name no other thread or process writes to.
std::string temp_name(const std::string& path) {
  return fmt::format("{}.tmp.{}.{}", path, getpid(),
                     std::hash<std::thread::id>{}(std::this_thread::get_id()));
}

void write_atomic(const std::string& path, const std::string& data) {
  std::string tmp = temp_name(path);
  {
    std::ofstream f(tmp, std::ios::binary);
    if (!f)
      throw ToolchainUnavailable(fmt::format(
          "smelt::compile: cannot write the kernel cache file {} ({})", tmp, std::strerror(errno)));
    f << data;
  }
  SMELT_CHECK(std::rename(tmp.c_str(), path.c_str()) == 0, "smelt::compile: cannot rename {} to {}",
              tmp, path);
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

std::string cache_dir() {
  std::string dir;
  if (const char* env = std::getenv("SMELT_CACHE_DIR"); env && *env) {
    dir = env;
  } else {
    const char* home = std::getenv("HOME");
    if (!home || !*home)
      throw ToolchainUnavailable(
          "smelt::compile: neither SMELT_CACHE_DIR nor HOME is set; set SMELT_CACHE_DIR to a "
          "private directory for the kernel cache");
    dir = std::string(home) + "/.cache/smelt";
    ::mkdir((std::string(home) + "/.cache").c_str(), 0700);
  }
  int mk = ::mkdir(dir.c_str(), 0700);
  int mk_errno = mk == 0 ? 0 : errno;
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    throw ToolchainUnavailable(fmt::format(
        "smelt::compile: cannot create the kernel cache directory {} ({}); set SMELT_CACHE_DIR "
        "to a writable directory of your own",
        dir, std::strerror(mk_errno ? mk_errno : ENOTDIR)));
  if (st.st_uid != ::getuid())
    throw ToolchainUnavailable(fmt::format(
        "smelt::compile: the kernel cache {} belongs to another user; set SMELT_CACHE_DIR to a "
        "directory of your own",
        dir));
  if (::access(dir.c_str(), W_OK | X_OK) != 0)
    throw ToolchainUnavailable(fmt::format(
        "smelt::compile: the kernel cache directory {} is not writable ({}); set SMELT_CACHE_DIR "
        "to a writable directory of your own",
        dir, std::strerror(errno)));
  if (st.st_mode & (S_IWGRP | S_IWOTH)) ::chmod(dir.c_str(), 0700);
  return dir;
}

int compiler_invocations() { return g_invocations.load(); }

KernelCache& kernel_cache() {
  static KernelCache cache;
  return cache;
}

std::shared_ptr<backend::Module> KernelCache::get_or_build(
    const std::string& source, const std::string& fingerprint, const std::string& source_ext,
    const std::string& binary_ext, const CompileFn& compile, const LoadFn& load,
    backend::BuildInfo* info) {
  uint64_t h = fnv1a(source);
  h = fnv1a(fingerprint, h);
  h = fnv1a(SMELT_VERSION, h);
  const std::string key = fmt::format("{:016x}", h);
  const std::string base = cache_dir() + "/" + key;
  const std::string binary_path = base + binary_ext;
  std::lock_guard<std::mutex> lock(key_mutex(key));
  backend::BuildInfo local;
  backend::BuildInfo& bi = info ? *info : local;
  bi.key = key;
  bi.source_path = base + source_ext;

  std::string why;
  auto try_load = [&]() -> std::shared_ptr<backend::Module> {
    bool ok_bin = false, ok_meta = false;
    std::string bin = read_file(binary_path, &ok_bin);
    std::string meta = read_file(base + ".meta", &ok_meta);
    if (!ok_bin || !ok_meta || meta != meta_of(bin)) {
      why = "the binary does not match its checksum";
      return nullptr;
    }
    return load(binary_path, &why);
  };
  if (auto module = try_load()) {
    bi.cache_hit = true;
    return module;
  }
  write_atomic(bi.source_path, source);
  const std::string tmp = temp_name(binary_path);
  auto t0 = std::chrono::steady_clock::now();
  ++g_invocations;
  try {
    compile(bi.source_path, tmp);
  } catch (...) {
    bi.build_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    std::remove(tmp.c_str());
    throw;
  }
  bi.build_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  std::string bin = read_file(tmp);
  SMELT_CHECK(std::rename(tmp.c_str(), binary_path.c_str()) == 0,
              "smelt::compile: cannot move {} into the kernel cache", tmp);
  write_atomic(base + ".meta", meta_of(bin));
  auto module = try_load();
  if (!module)
    throw Error(
        fmt::format("smelt::compile: cannot load the freshly built {}: {}", binary_path, why));
  return module;
}

}  // namespace smelt::compiler
