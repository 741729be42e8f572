// Run-time CPU capability dispatch of the eager CPU kernels, as ATen's
// DispatchStub (aten/src/ATen/native/DispatchStub.h).
//
// The kernel sources listed in CMakeLists.txt (SMELT_CPU_KERNEL_SOURCES) are
// compiled once per capability: `cap_default` (the baseline x86-64 ISA, or the
// target's baseline elsewhere), and on x86-64 `cap_avx2` (AVX2, FMA, F16C) and
// `cap_avx512` (AVX-512 F/BW/VL/DQ, 512-bit vectors). Each compile defines
// SMELT_CPU_CAP to the capability's name, and everything such a source
// defines lives in namespace smelt::cpu::SMELT_CPU_CAP (or an anonymous
// namespace), so the copies never clash. A kernel is reached through a stub
// declared once (SMELT_DECLARE_DISPATCH, in a header) and filled by each copy
// (SMELT_REGISTER_DISPATCH); calling the stub runs the copy of the best
// capability this processor has (cpuid, checked once), or the one asked for
// by $SMELT_CPU_CAPABILITY (default | avx2 | avx512; never above the
// hardware's).
//
// Results do not depend on the capability: every copy is built with
// -ffp-contract=off (no FMA contraction, as the JIT's kernels), and the math
// functions are SLEEF's deterministic ones of the family the processor
// decides (src/kernels/vector_math.h), so every ISA gives the same bits
// (tests/backend/test_cpu_capability.cpp checks it). tools/check_cpu_isa.py checks the built
// library: AVX instructions only in functions of the AVX copies (baseline objects are linked first,
// so code the copies share, such as template instantiations, is the baseline one).
#pragma once
#include <utility>

namespace smelt::cpu {

/// The instruction sets eager kernels are built for, lowest first.
enum class CpuCapability : int { Default = 0, AVX2 = 1, AVX512 = 2 };

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
/// 1 when this build has the AVX2 and AVX-512 copies of the kernels.
#define SMELT_CPU_HAVE_X86_CAPS 1
#else
#define SMELT_CPU_HAVE_X86_CAPS 0
#endif

/// The best capability of this processor (and operating system).
CpuCapability hardware_cpu_capability();
/// The capability kernels run with: the hardware's, lowered by
/// $SMELT_CPU_CAPABILITY or set_cpu_capability(). Throws smelt::Error for an
/// unknown $SMELT_CPU_CAPABILITY value.
CpuCapability cpu_capability();
/// Runs later kernels with `c`, at most the hardware's capability (returns the
/// one set). For tests that compare capabilities; not thread-safe with
/// kernels running.
CpuCapability set_cpu_capability(CpuCapability c);
/// "default", "avx2", "avx512".
const char* cpu_capability_name(CpuCapability c);

/// A kernel with one implementation per capability (see the file comment).
/// `Name` makes each stub a distinct type with its own static members.
template <class FnT, class Name>
struct DispatchStub {
  using Fn = FnT;
  static Fn cap_default;
  static Fn cap_avx2;
  static Fn cap_avx512;

  /// The implementation for cpu_capability().
  static Fn pick() {
#if SMELT_CPU_HAVE_X86_CAPS
    switch (cpu_capability()) {
      case CpuCapability::AVX512:
        return cap_avx512;
      case CpuCapability::AVX2:
        return cap_avx2;
      case CpuCapability::Default:
        break;
    }
#endif
    return cap_default;
  }
  template <class... A>
  decltype(auto) operator()(A&&... a) const {
    return pick()(std::forward<A>(a)...);
  }
};

}  // namespace smelt::cpu

/// Declares and defines stub `name` for kernels of function-pointer type `fn`
/// (in a header, in namespace smelt::cpu), with the declarations of its
/// per-capability implementations (defined by SMELT_REGISTER_DISPATCH).
#define SMELT_DECLARE_DISPATCH(fn, name)                                   \
  struct name##_stub_t : ::smelt::cpu::DispatchStub<fn, name##_stub_t> {}; \
  template <>                                                              \
  fn DispatchStub<fn, name##_stub_t>::cap_default;                         \
  template <>                                                              \
  fn DispatchStub<fn, name##_stub_t>::cap_avx2;                            \
  template <>                                                              \
  fn DispatchStub<fn, name##_stub_t>::cap_avx512;                          \
  inline constexpr name##_stub_t name {}

/// Sets this capability's implementation of stub `name` to `fn` (in a kernel
/// source, at global namespace scope). Written inside the namespace: Clang
/// reads `::smelt::cpu::X::Fn ::smelt::cpu::...` as one nested name. `fn` must
/// be fully qualified.
#define SMELT_REGISTER_DISPATCH(name, fn)                                               \
  namespace smelt::cpu {                                                                \
  template <>                                                                           \
  name##_stub_t::Fn DispatchStub<name##_stub_t::Fn, name##_stub_t>::SMELT_CPU_CAP = fn; \
  }                                                                                     \
  static_assert(true)
