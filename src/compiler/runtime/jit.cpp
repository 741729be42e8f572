#include "compiler/runtime/jit.h"

#include <dlfcn.h>
#include <fmt/format.h>
#include <poll.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <vector>

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

extern "C" char** environ;

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
    if (!f)
      throw JitUnavailable(fmt::format("smelt::compile: cannot write the kernel cache file {} ({})",
                                       tmp, std::strerror(errno)));
    f << data;
  }
  SMELT_CHECK(std::rename(tmp.c_str(), path.c_str()) == 0, "smelt::compile: cannot rename {} to {}",
              tmp, path);
}

/// Runs `argv` (no shell: paths are passed verbatim) with stdout and stderr
/// captured; kills it after `timeout_s` seconds. Returns the exit status, 127
/// when the program cannot be started, -1 when killed for the timeout.
int run_command(const std::vector<std::string>& argv, std::string* output, int timeout_s) {
  int fds[2];
  if (::pipe(fds) != 0) return 127;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
  posix_spawn_file_actions_adddup2(&fa, fds[1], 2);
  posix_spawn_file_actions_addclose(&fa, fds[0]);
  std::vector<char*> args;
  for (auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  // Its own process group, so that a timeout kills whatever it started too.
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attr, 0);
  pid_t pid = 0;
  int rc = posix_spawnp(&pid, args[0], &fa, &attr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  ::close(fds[1]);
  if (rc != 0) {
    ::close(fds[0]);
    *output = std::strerror(rc);
    return 127;
  }
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  bool timed_out = false;
  char buf[4096];
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                    deadline - std::chrono::steady_clock::now())
                    .count();
    if (left <= 0) {
      timed_out = true;
      ::kill(-pid, SIGKILL);
      break;
    }
    pollfd p{fds[0], POLLIN, 0};
    int r = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left, 1000)));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) continue;
    ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n <= 0) break;
    output->append(buf, static_cast<size_t>(n));
  }
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (timed_out) return -1;
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

/// Seconds a compiler run may take (SMELT_COMPILE_TIMEOUT, default 300).
int compile_timeout() {
  const char* env = std::getenv("SMELT_COMPILE_TIMEOUT");
  int t = env ? std::atoi(env) : 0;
  return t > 0 ? t : 300;
}

std::string compiler() {
  const char* env = std::getenv("SMELT_CXX");
  return env && *env ? env : "g++";
}

/// -ffp-contract=off: no fused multiply-add the eager kernels do not do, so
/// compiled pointwise code rounds exactly as eager.
const std::vector<std::string>& flag_list() {
  static const std::vector<std::string> f = {"-O3",
                                             "-march=native",
                                             "-ffp-contract=off",
                                             "-fno-math-errno",
                                             "-fopenmp",
                                             "-shared",
                                             "-fPIC",
                                             "-std=c++17",
                                             "-w"};
  return f;
}
std::string flags() { return fmt::format("{}", fmt::join(flag_list(), " ")); }

std::string compiler_version() {
  static std::mutex m;
  static std::map<std::string, std::string> cache;
  std::lock_guard<std::mutex> lock(m);
  auto it = cache.find(compiler());
  if (it != cache.end()) return it->second;
  std::string out;
  int rc = run_command({compiler(), "--version"}, &out, 30);
  if (rc != 0)
    throw JitUnavailable(fmt::format(
        "smelt::compile: the C++ compiler '{}' was not found or does not run ({}); install g++ "
        "(`make deps`) or set SMELT_CXX to a working compiler",
        compiler(),
        rc == 127 ? "cannot start it"
        : rc < 0  ? "timed out"
                  : fmt::format("exit {}", rc)));
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
    if (!home || !*home)
      throw JitUnavailable(
          "smelt::compile: neither SMELT_CACHE_DIR nor HOME is set; set SMELT_CACHE_DIR to a "
          "private directory for the kernel cache");
    dir = std::string(home) + "/.cache/smelt";
    ::mkdir((std::string(home) + "/.cache").c_str(), 0700);
  }
  int mk = ::mkdir(dir.c_str(), 0700);
  int mk_errno = mk == 0 ? 0 : errno;
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    throw JitUnavailable(fmt::format(
        "smelt::compile: cannot create the kernel cache directory {} ({}); set SMELT_CACHE_DIR "
        "to a writable directory of your own",
        dir, std::strerror(mk_errno ? mk_errno : ENOTDIR)));
  if (st.st_uid != ::getuid())
    throw JitUnavailable(fmt::format(
        "smelt::compile: the kernel cache {} belongs to another user; set SMELT_CACHE_DIR to a "
        "directory of your own",
        dir));
  if (::access(dir.c_str(), W_OK | X_OK) != 0)
    throw JitUnavailable(fmt::format(
        "smelt::compile: the kernel cache directory {} is not writable ({}); set SMELT_CACHE_DIR "
        "to a writable directory of your own",
        dir, std::strerror(errno)));
  if (st.st_mode & (S_IWGRP | S_IWOTH)) ::chmod(dir.c_str(), 0700);
  return dir;
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
  std::vector<std::string> argv = {compiler()};
  argv.insert(argv.end(), flag_list().begin(), flag_list().end());
  argv.insert(argv.end(), {"-o", tmp, base + ".cpp", "-lmvec"});
  std::string cmd = fmt::format("{}", fmt::join(argv, " "));
  std::string out;
  auto t0 = std::chrono::steady_clock::now();
  ++g_invocations;
  int rc = run_command(argv, &out, compile_timeout());
  bi.build_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (rc != 0) {
    std::remove(tmp.c_str());
    if (rc == 127 || rc < 0)
      throw JitUnavailable(fmt::format(
          "smelt::compile: the C++ compiler {} (after {} s; SMELT_COMPILE_TIMEOUT sets the "
          "limit)\n  command: {}",
          rc < 0 ? "timed out" : "could not be started", compile_timeout(), cmd));
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
  if (!lib) {
    const char* why = dlerror();
    throw Error(fmt::format("smelt::compile: cannot load the freshly built {}.so: {}", base,
                            why ? why : "the binary does not match its checksum"));
  }
  return lib;
}

}  // namespace smelt::compiler
