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

/// A name no other thread or process writes to.
std::string temp_name(const std::string& path) {
  return fmt::format("{}.tmp.{}.{}", path, getpid(),
                     std::hash<std::thread::id>{}(std::this_thread::get_id()));
}

}  // namespace

uint64_t fnv1a(const std::string& s, uint64_t h) {
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
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
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    std::remove(tmp.c_str());
    throw ToolchainUnavailable(
        fmt::format("smelt::compile: cannot rename {} to {} ({})", tmp, path, std::strerror(err)));
  }
}

namespace {

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

namespace {

[[noreturn]] void unusable(const std::string& dir, const std::string& why) {
  throw ToolchainUnavailable(
      fmt::format("smelt::compile: the kernel cache directory {} {}; set SMELT_CACHE_DIR to a "
                  "directory of your own",
                  dir, why));
}

/// Creates `dir` and its missing parents, each with mode 0700 (mkdir -p).
/// Directories that exist are left as they are.
void make_dirs(const std::string& dir) {
  size_t pos = 0;
  do {
    pos = dir.find('/', pos + 1);
    const std::string part = dir.substr(0, pos);
    if (::mkdir(part.c_str(), 0700) == 0 || errno == EEXIST) continue;
    const int err = errno;
    struct stat st {};
    if (::stat(part.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) continue;  // EACCES on a parent
    unusable(dir, part == dir ? fmt::format("cannot be created ({})", std::strerror(err))
                              : fmt::format("cannot be created: mkdir {} failed ({})", part,
                                            std::strerror(err)));
  } while (pos != std::string::npos);
}

/// Checks that `dir` is a directory this user owns, may write, and nobody else
/// may write (lstat when `no_symlink`: a name another user could have planted).
/// Returns "" when usable, else why not.
std::string private_dir_problem(const std::string& dir, bool no_symlink) {
  struct stat st {};
  if ((no_symlink ? ::lstat(dir.c_str(), &st) : ::stat(dir.c_str(), &st)) != 0)
    return fmt::format("cannot be read ({})", std::strerror(errno));
  if (!S_ISDIR(st.st_mode)) return "is not a directory";
  if (st.st_uid != ::geteuid()) return "belongs to another user";
  if (st.st_mode & (S_IWGRP | S_IWOTH)) return "is writable by other users";
  if (::access(dir.c_str(), W_OK | X_OK) != 0)
    return fmt::format("is not writable ({})", std::strerror(errno));
  return "";
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
  }
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  make_dirs(dir);
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0)
    unusable(dir, fmt::format("cannot be read ({})", std::strerror(errno)));
  if (!S_ISDIR(st.st_mode)) unusable(dir, "is not a directory");
  // A directory others may write into (such as /tmp) is never chmod-ed: smelt
  // did not create it. Where the sticky bit keeps others from renaming what
  // this user creates in it, the cache is a private subdirectory smelt-<uid>;
  // elsewhere it is refused.
  if (st.st_mode & (S_IWGRP | S_IWOTH)) {
    if (!(st.st_mode & S_ISVTX))
      unusable(dir,
               "is writable by other users and has no sticky bit, so they could replace the "
               "kernels smelt loads from it");
    dir += fmt::format("/smelt-{}", ::geteuid());
    if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
      unusable(dir, fmt::format("cannot be created ({})", std::strerror(errno)));
    if (std::string why = private_dir_problem(dir, true); !why.empty()) unusable(dir, why);
    return dir;
  }
  if (std::string why = private_dir_problem(dir, false); !why.empty()) unusable(dir, why);
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
  bool wrote = false;
  std::string bin = read_file(tmp, &wrote);
  if (!wrote || bin.empty()) {
    std::remove(tmp.c_str());
    throw ToolchainUnavailable(
        fmt::format("smelt::compile: the compiler reported success but wrote no binary (source "
                    "{}); set SMELT_CXX to a working C++ compiler",
                    bi.source_path));
  }
  if (std::rename(tmp.c_str(), binary_path.c_str()) != 0) {
    const int err = errno;
    std::remove(tmp.c_str());
    throw ToolchainUnavailable(fmt::format(
        "smelt::compile: cannot move {} into the kernel cache ({})", tmp, std::strerror(err)));
  }
  // binary_path now holds this build or, where another process built the same
  // key at the same moment and renamed after this one, that process's: a build
  // of the same source whose bytes may differ (precompiled headers are not
  // reproducible, and a unit built without one differs from one built through
  // it). Either is loaded, and the checksum is written for the one there; the
  // two processes' checksum writes may still cross, which only costs a later
  // process a rebuild (its load finds the pair mismatched).
  bool now_ok = false;
  const std::string now = read_file(binary_path, &now_ok);
  write_atomic(base + ".meta", meta_of(now_ok && !now.empty() ? now : bin));
  why.clear();
  auto module = load(binary_path, &why);
  if (!module)
    throw Error(
        fmt::format("smelt::compile: cannot load the freshly built {}: {}", binary_path, why));
  return module;
}

}  // namespace smelt::compiler
