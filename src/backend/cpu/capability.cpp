// The CPU capability the eager kernels run with (see capability.h): cpuid
// through GCC's __builtin_cpu_supports (which also checks that the operating
// system saves the AVX / AVX-512 registers), lowered by $SMELT_CPU_CAPABILITY.
#include "backend/cpu/capability.h"

#include <atomic>
#include <cstdlib>
#include <string>

#include "smelt/error.h"

#if SMELT_CPU_HAVE_X86_CAPS
#include <cpuid.h>
#endif

namespace smelt::cpu {

namespace {

CpuCapability detect() {
#if SMELT_CPU_HAVE_X86_CAPS
  __builtin_cpu_init();
  // F16C through CPUID leaf 1 (ECX bit 29): Clang's __builtin_cpu_supports
  // does not know "f16c".
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  const bool f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & bit_F16C) != 0;
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && f16c;
  const bool avx512 = avx2 && __builtin_cpu_supports("avx512f") &&
                      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
                      __builtin_cpu_supports("avx512dq");
  if (avx512) return CpuCapability::AVX512;
  if (avx2) return CpuCapability::AVX2;
#endif
  return CpuCapability::Default;
}

CpuCapability from_env(CpuCapability hw) {
  const char* env = std::getenv("SMELT_CPU_CAPABILITY");
  if (env == nullptr || *env == '\0') return hw;
  const std::string v = env;
  CpuCapability want;
  if (v == "default") {
    want = CpuCapability::Default;
  } else if (v == "avx2") {
    want = CpuCapability::AVX2;
  } else if (v == "avx512") {
    want = CpuCapability::AVX512;
  } else {
    SMELT_CHECK(false,
                "SMELT_CPU_CAPABILITY={} is not a CPU capability; use default, avx2 or avx512 "
                "(or unset it for the best this processor has)",
                v);
  }
  return static_cast<int>(want) < static_cast<int>(hw) ? want : hw;
}

std::atomic<int> g_capability{-1};

}  // namespace

CpuCapability hardware_cpu_capability() {
  static const CpuCapability hw = detect();
  return hw;
}

CpuCapability cpu_capability() {
  int c = g_capability.load(std::memory_order_relaxed);
  if (c < 0) {
    c = static_cast<int>(from_env(hardware_cpu_capability()));
    g_capability.store(c, std::memory_order_relaxed);
  }
  return static_cast<CpuCapability>(c);
}

CpuCapability set_cpu_capability(CpuCapability c) {
  const CpuCapability hw = hardware_cpu_capability();
  const CpuCapability set = static_cast<int>(c) < static_cast<int>(hw) ? c : hw;
  g_capability.store(static_cast<int>(set), std::memory_order_relaxed);
  return set;
}

const char* cpu_capability_name(CpuCapability c) {
  switch (c) {
    case CpuCapability::AVX512:
      return "avx512";
    case CpuCapability::AVX2:
      return "avx2";
    case CpuCapability::Default:
      break;
  }
  return "default";
}

}  // namespace smelt::cpu
