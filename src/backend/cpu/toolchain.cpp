// The CPU toolchain (see toolchain.h): the compiler command, the fingerprint
// that keys its binaries (flags, compiler and version, CPU model and ISA
// flags), a process runner with a timeout, and dlopen.
#include "backend/cpu/toolchain.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <vector>

#include "backend/toolchain_files.h"
#include "kernels/embedded_source.h"
#include "smelt/error.h"

extern "C" char** environ;

namespace smelt::cpu {

namespace {

using backend::ToolchainUnavailable;

/// Runs `argv` (no shell: paths are passed verbatim) with stdout and stderr
/// captured; kills it after `timeout_s` seconds. Returns the exit status, 127
/// when the program cannot be started, -1 when killed for the timeout.
int run_command(const std::vector<std::string>& argv, std::string* output, int timeout_s) {
  // Close-on-exec: a compiler started at the same time by another thread
  // must not inherit this pipe (its read would then wait for that compiler).
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return 127;
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

/// Seconds a compiler run may take: SMELT_COMPILE_TIMEOUT, a whole number from
/// 1 to 86400 (default 300 when unset or empty). Error for anything else.
int compile_timeout() {
  const char* env = std::getenv("SMELT_COMPILE_TIMEOUT");
  if (!env || !*env) return 300;
  errno = 0;
  char* end = nullptr;
  long t = std::strtol(env, &end, 10);
  SMELT_CHECK(errno == 0 && end != env && *end == '\0' && t >= 1 && t <= 86400,
              "smelt::compile: SMELT_COMPILE_TIMEOUT='{}' is not a number of seconds; set it to a "
              "whole number from 1 to 86400 (or unset it for the default, 300)",
              env);
  return static_cast<int>(t);
}

std::string compiler() {
  const char* env = std::getenv("SMELT_CXX");
  return env && *env ? env : "g++";
}

/// The flags, audited for what they change in results (compiled must equal eager):
/// -O3: only IEEE-preserving optimizations (no -ffast-math, -Ofast or
///   -funsafe-math-optimizations: no reassociation, signed zeros and NaNs kept).
/// -march=native: wider vectors and FMA instructions; FMA is kept out by
/// -ffp-contract=off (below).
/// -mprefer-vector-width=512: on an AVX-512 processor GCC's loop and SLP
///   vectorizers otherwise use 256-bit registers while the kernels' explicit
///   8-lane double vectors (reduce_ops.h: Welford's lanes of var / layer_norm)
///   are 512-bit: each such vector was filled by two 256-bit stores and read
///   back by one 512-bit load, a failed store-to-load forward per vector
///   (compiled layer_norm 8192 x 2048 on 2 threads of a Sapphire Rapids:
///   28.1 -> 10.4 ms; softmax 12.3 -> 10.1; batchnorm-relu 3.4 -> 2.3). No
///   effect without AVX-512; vector width changes no value (no reassociation).
/// -ffp-contract=off: no fused multiply-add the eager kernels do not do, so
///   compiled pointwise code rounds exactly as eager.
/// -fno-math-errno: libm calls have no side effect (exp, log, sin, tanh, erf...
///   are SLEEF's through kernels/vector_math.h, vectorized and bitwise eager's
///   on every path; the JIT links SMELT_SLEEF_LIBRARY, the library smelt was
///   built with; pow too, so GCC never rewrites it with a constant exponent
///   into sqrt or x*x). scalar::fmax/fmin avoid std::fmax, whose sign of a zero
///   result is unspecified.
/// -fno-trapping-math: floating-point operations may be assumed not to trap,
///   so a select (where, masked_fill, relu, a causal or padding mask before
///   softmax) computes both sides and vectorizes; with trapping math GCC kept
///   such loops scalar ("control flow in loop"). It changes no value: only
///   which exception flags an operation may raise, which nothing reads
///   (-frounding-math stays off: round-to-nearest is assumed, as eager builds do).
/// -fopenmp: only the printed pragmas (no `omp simd`, which would allow
///   reassociating reductions). -shared, -fPIC, -std=c++17, -w: no effect on values.
const std::vector<std::string>& flag_list() {
  static const std::vector<std::string> f = {"-O3",
                                             "-march=native",
                                             "-mprefer-vector-width=512",
                                             "-ffp-contract=off",
                                             "-fno-math-errno",
                                             "-fno-trapping-math",
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
    throw ToolchainUnavailable(fmt::format(
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

/// A loaded shared object.
class CpuModule final : public backend::Module {
 public:
  CpuModule(void* handle, std::string path) : handle_(handle), path_(std::move(path)) {}
  ~CpuModule() override {
    if (handle_) dlclose(handle_);
  }
  CpuModule(const CpuModule&) = delete;
  CpuModule& operator=(const CpuModule&) = delete;
  backend::KernelHandle function(const std::string& name) const override {
    void* f = dlsym(handle_, name.c_str());
    SMELT_CHECK(f != nullptr, "smelt::compile: kernel {} is missing from {}", name, path_);
    return backend::KernelHandle{f};
  }
  const std::string& path() const override { return path_; }

 private:
  void* handle_;
  std::string path_;
};

/// Runs the compiler with the audited flags (and `extra`: "-c", libraries) on
/// `source_path`, writing `binary_path`; raises as ModuleCache::CompileFn says.
void run_compiler(const std::string& source_path, const std::string& binary_path,
                  const std::vector<std::string>& extra) {
  std::vector<std::string> argv = {compiler()};
  argv.insert(argv.end(), flag_list().begin(), flag_list().end());
  argv.insert(argv.end(), {"-o", binary_path, source_path});
  argv.insert(argv.end(), extra.begin(), extra.end());
  std::string cmd = fmt::format("{}", fmt::join(argv, " "));
  std::string out;
  int rc = run_command(argv, &out, compile_timeout());
  if (rc == 0) {
    struct stat st {};
    if (::stat(binary_path.c_str(), &st) == 0 && st.st_size > 0) return;
    std::remove(binary_path.c_str());
    throw ToolchainUnavailable(fmt::format(
        "smelt::compile: the C++ compiler '{}' exited successfully but wrote no output; "
        "set SMELT_CXX to a working C++ compiler (g++ or clang++)\n  command: {}",
        compiler(), cmd));
  }
  if (rc == 127 || rc < 0)
    throw ToolchainUnavailable(fmt::format(
        "smelt::compile: the C++ compiler {} (after {} s; SMELT_COMPILE_TIMEOUT sets the "
        "limit)\n  command: {}",
        rc < 0 ? "timed out" : "could not be started", compile_timeout(), cmd));
  throw Error(
      fmt::format("smelt::compile: building generated code failed (exit {})\n  command: {}\n"
                  "  source: {}\n{}",
                  rc, cmd, source_path, out));
}

/// "-fuse-ld=gold" where the compiler links with GNU gold, else nothing (the
/// default linker). A kernel library is linked from the unit, the math object
/// and SLEEF: a one-kernel graph took 120 ms with ld.bfd and 90 with gold on a
/// 2-core AMD EPYC (g++ 12; lld: 100-125). The linker changes no code.
std::vector<std::string> fast_linker() {
  static std::mutex m;
  static std::map<std::string, bool> has_gold;  // per compiler
  std::lock_guard<std::mutex> lock(m);
  auto it = has_gold.find(compiler());
  if (it == has_gold.end()) {
    std::string out;
    const int rc = run_command({compiler(), "-fuse-ld=gold", "-Wl,--version"}, &out, 30);
    it = has_gold.emplace(compiler(), rc == 0 && out.find("GNU gold") != std::string::npos).first;
  }
  if (it->second) return {"-fuse-ld=gold"};
  return {};
}

/// An object file in the cache (linked into kernel libraries, never loaded).
class ObjectFile final : public backend::Module {
 public:
  explicit ObjectFile(std::string path) : path_(std::move(path)) {}
  backend::KernelHandle function(const std::string& name) const override {
    SMELT_INTERNAL_ASSERT(false, "{} is an object file; it has no kernel {}", path_, name);
    return {};
  }
  const std::string& path() const override { return path_; }

 private:
  std::string path_;
};

/// The object file of the math functions every kernel library links
/// (kernels/vector_math_impl.h: SLEEF's functions under the vector ABI names
/// the vectorizer calls), built once per toolchain and kept in the kernel
/// cache like a kernel: defining them in every kernel's translation unit cost
/// each compile about 0.1 s (0.6 s with <immintrin.h>). It also holds the
/// out-of-line folds of contiguous rows (kernels/reduce_jit.h; compiled once,
/// they keep reduce_ops.h's chunk pairs, which change no bit).
const std::string& math_source() {
  static const std::string source =
      std::string("// smelt JIT math support\n") + backend::kNoSpecialMathFunctions +
      "#define SMELT_VM_VISIBILITY \"hidden\"\n#define SMELT_REDUCE_JIT_DEFINE 1\n" +
      kernels::embedded_source({"half.h", "vector_math.h", "piecewise_math.h", "vector_math_impl.h",
                                "scalar_ops.h", "reduce_ops.h", "reduce_jit.h"},
                               true);
  return source;
}

std::string math_object(backend::ModuleCache& cache, const std::string& fingerprint) {
  const std::string& source = math_source();
  auto compile = [](const std::string& source_path, const std::string& binary_path) {
    run_compiler(source_path, binary_path, {"-c"});
  };
  auto load = [](const std::string& binary_path, std::string*) -> std::shared_ptr<backend::Module> {
    return std::make_shared<ObjectFile>(binary_path);
  };
  return cache.get_or_build(source, fingerprint, ".cpp", ".o", compile, load, nullptr)->path();
}

/// The precompiled header of a translation unit's preamble (the text before
/// backend::kPreambleEnd), built once per toolchain and preamble and kept in
/// the kernel cache as <key>.h beside <key>.h.gch, where GCC finds it when a
/// unit includes <key>.h first: parsing the preamble was 85% of a one-kernel
/// unit's compile (0.3 of 0.4 s on a 2-core machine; 0.13 s with the header
/// precompiled). "" when it cannot be built: the unit is then compiled whole.
/// (A compiler that does not read .gch files, such as clang, parses the
/// header instead: the same code, only slower.)
std::string precompiled_preamble(backend::ModuleCache& cache, const std::string& fingerprint,
                                 const std::string& preamble) {
  static std::mutex mu;
  static std::map<std::string, std::string> built;  // fingerprint + preamble -> header path
  const std::string id = fingerprint + '\0' + preamble;
  {
    // Reused while its files are there (a kernel cache directory can be
    // removed, or SMELT_CACHE_DIR changed, within one process).
    std::lock_guard<std::mutex> lock(mu);
    if (auto it = built.find(id); it != built.end()) {
      struct stat st {};
      if (!it->second.empty() && ::stat(it->second.c_str(), &st) == 0 &&
          ::stat((it->second + ".gch").c_str(), &st) == 0)
        return it->second;
      built.erase(it);
    }
  }
  auto compile = [](const std::string& source_path, const std::string& binary_path) {
    run_compiler(source_path, binary_path, {});  // a .h input: g++ writes a precompiled header
  };
  auto load = [](const std::string& binary_path, std::string*) -> std::shared_ptr<backend::Module> {
    return std::make_shared<ObjectFile>(binary_path);
  };
  std::string header;
  try {
    const std::string gch =
        cache.get_or_build(preamble, fingerprint, ".h", ".h.gch", compile, load, nullptr)->path();
    header = gch.substr(0, gch.size() - 4);  // <key>.h
  } catch (const Error&) {
    header.clear();  // compiled whole instead
  }
  std::lock_guard<std::mutex> lock(mu);
  if (!header.empty()) built[id] = header;
  return header;
}

/// Compiles unit `source_path` into `binary_path` (with the math object and
/// SLEEF), through the precompiled preamble where the unit has one: a copy of
/// the unit beside it that includes the header instead of its preamble's text.
void compile_unit(backend::ModuleCache& cache, const std::string& fingerprint,
                  const std::string& source_path, const std::string& binary_path) {
  std::vector<std::string> link = fast_linker();
  link.insert(link.end(), {math_object(cache, fingerprint), SMELT_SLEEF_LIBRARY});
  bool ok = false;
  const std::string source = backend::read_file(source_path, &ok);
  const size_t cut = ok ? source.find(backend::kPreambleEnd) : std::string::npos;
  const std::string header = cut == std::string::npos
                                 ? ""
                                 : precompiled_preamble(cache, fingerprint, source.substr(0, cut));
  if (header.empty()) return run_compiler(source_path, binary_path, link);
  const std::string unit = binary_path + ".pch.cpp";
  {
    std::ofstream f(unit, std::ios::binary | std::ios::trunc);
    f << "#include \"" << header << "\"\n"
      << source.substr(cut + std::char_traits<char>::length(backend::kPreambleEnd));
    if (!f) return run_compiler(source_path, binary_path, link);
  }
  bool built = false;
  try {
    run_compiler(unit, binary_path, link);
    built = true;
  } catch (const ToolchainUnavailable&) {
    std::remove(unit.c_str());
    throw;  // no compiler, or it timed out: no second try
  } catch (const Error&) {
    // Compiled whole below: the same result where the header was at fault, and
    // otherwise the compiler's message about the unit the cache keeps.
  }
  std::remove(unit.c_str());
  if (!built) run_compiler(source_path, binary_path, link);
}

}  // namespace

std::shared_ptr<backend::Module> build_module(const std::string& source,
                                              backend::ModuleCache& cache,
                                              backend::BuildInfo* info) {
  // The hash of these, after the source's, keys the binary.
  compile_timeout();  // an invalid SMELT_COMPILE_TIMEOUT is an error even on a cache hit
  const std::string fingerprint = flags() + compiler() + "|" + compiler_version() + cpu_isa();
  // A kernel library links the math object in (math_object), so its key also
  // carries the math source's hash: a change to vector_math_impl.h alone
  // rebuilds the kernels instead of reusing ones linked with the old math.
  static const std::string math_key =
      fmt::format("|math {:016x}", std::hash<std::string>{}(math_source()));
  auto compile = [&cache, &fingerprint](const std::string& source_path,
                                        const std::string& binary_path) {
    compile_unit(cache, fingerprint, source_path, binary_path);
  };
  auto load = [](const std::string& binary_path,
                 std::string* why) -> std::shared_ptr<backend::Module> {
    void* handle = dlopen(binary_path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      const char* e = dlerror();
      if (why) *why = e ? e : "dlopen failed";
      return nullptr;
    }
    return std::make_shared<CpuModule>(handle, binary_path);
  };
  return cache.get_or_build(source, fingerprint + math_key, ".cpp", ".so", compile, load, info);
}

}  // namespace smelt::cpu
