// smelt/kernels/vector_math_impl.h — the definitions behind vector_math.h: the
// scalar functions and, on x86-64, their SIMD variants under the x86-64 vector
// function ABI names that GCC's vectorizer calls (b = SSE, c = AVX, d = AVX2,
// e = AVX-512; N<lanes>v = that many lanes of one vector argument). Every one
// calls SLEEF's deterministic function of accuracy u10 of one family, the FMA
// one ("finz") where the processor has AVX2 and FMA and the no-FMA one
// ("cinz") elsewhere (smelt_vm_fma), so all give the same bits for the same
// input (vector_math.h says why); float sin and cos of the FMA family are
// smelt's own (SMELT_VM_TRIG), and so is the 16-lane FMA-family float exp
// (piecewise_math.h's exp16: SLEEF's bits in fewer instructions); float tanh,
// erf and pow on AVX-512F are piecewise_math.h's (below).
//
// Compiled once into libsmelt (src/kernels/vector_math.cpp, exported) and
// embedded into every JIT translation unit (with SMELT_VM_VISIBILITY hidden,
// so each kernel library binds to its own copy). The definitions take their
// ABI symbol names through asm labels, so the C++ compiler does not confuse
// them with the `simd`-declared functions whose variants they are.
#pragma once

#include "kernels/piecewise_math.h"

#if !defined(__CUDA_ARCH__)
#if defined(__x86_64__)
// The vector types of the x86-64 vector function ABI, as GCC vector extensions
// (the same registers as <immintrin.h>'s __m128/__m256/smelt_vm_f16, without its
// parsing cost in every JIT translation unit).
typedef float smelt_vm_f4 __attribute__((vector_size(16)));
typedef float smelt_vm_f8 __attribute__((vector_size(32)));
typedef float smelt_vm_f16 __attribute__((vector_size(64)));
typedef double smelt_vm_d2 __attribute__((vector_size(16)));
typedef double smelt_vm_d4 __attribute__((vector_size(32)));
typedef double smelt_vm_d8 __attribute__((vector_size(64)));
#endif

#ifndef SMELT_VM_VISIBILITY
#define SMELT_VM_VISIBILITY "default"
#endif

#if defined(__x86_64__)
/// True when this processor has AVX2 and FMA: every path then computes
/// SLEEF's deterministic FMA functions ("finz"), else its no-FMA ones
/// ("cinz"). Decided from the hardware alone (never from the code path, the
/// vector width or the eager capability), once, so that scalar code, every
/// vector width, eager and JIT give the same bits on one machine. (FMA: the
/// same accuracy, u10, in 25-40% less time: exp, sin and cos bound softmax
/// and sin + cos.)
/// `probe()` (a __builtin_cpu_supports test) run once into `state` (-1:
/// not yet; constant-initialized, so valid before any constructor runs).
static inline bool smelt_vm_cpu_once(int* state, int (*probe)()) {
  int s = __atomic_load_n(state, __ATOMIC_RELAXED);
  if (s < 0) {
    __builtin_cpu_init();
    s = probe();
    __atomic_store_n(state, s, __ATOMIC_RELAXED);
  }
  return s != 0;
}
static inline bool smelt_vm_fma() {
  static int state = -1;
  return smelt_vm_cpu_once(&state, [] {
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? 1 : 0;
  });
}
#define SMELT_VM_PICK(cinz, finz, ...) (smelt_vm_fma() ? finz(__VA_ARGS__) : cinz(__VA_ARGS__))
#else
#define SMELT_VM_PICK(cinz, finz, ...) cinz(__VA_ARGS__)
#endif

#if defined(__x86_64__)
// float sin and cos of the FMA family: smelt's own (vector_math.h says how and
// why), for |x| <= 2^31; SLEEF's (finz, u10) above, for infinities and NaN
// (a whole vector calls SLEEF where any lane needs it, and takes those lanes).
// The same operations in every width (double lanes, fused multiply-adds:
// SMELT_VM_TRIG_BODY, piecewise_math.h, whose pw::trig8 is the 8-lane one
// that pw::trig16 and the eager kernels inline), so the same bits.
#define SMELT_VM_TRIG_SCALAR_S(c) (c)
#define SMELT_VM_TRIG_SCALAR_FMA(a, b, c) __builtin_fma(a, b, c)
static inline __attribute__((target("fma"))) double smelt_vm_trig_floor1(double a, double b) {
  double out;
  SMELT_VM_FLOOR_FMA(double, SMELT_VM_TRIG_SCALAR_FMA, SMELT_VM_TRIG_SCALAR_S, a, b, out);
  return out;
}
typedef double smelt_vm_trig_d4 __attribute__((vector_size(32)));
typedef unsigned long long smelt_vm_trig_u4 __attribute__((vector_size(32)));
typedef unsigned int smelt_vm_trig_i4 __attribute__((vector_size(16)));
typedef unsigned int smelt_vm_trig_i8 __attribute__((vector_size(32)));
typedef unsigned int smelt_vm_trig_i16 __attribute__((vector_size(64)));
typedef int smelt_vm_trig_s16 __attribute__((vector_size(64)));
#define SMELT_VM_TRIG_WIDEN4(f) __builtin_convertvector(f, smelt_vm_trig_d4)
#define SMELT_VM_TRIG_S4(c) (smelt_vm_trig_d4{} + (c))
#define SMELT_VM_TRIG_FMA4(a, b, c) __builtin_ia32_vfmaddpd256(a, b, c)
static inline __attribute__((target("avx2,fma"))) smelt_vm_trig_d4 smelt_vm_trig_floor4(
    smelt_vm_trig_d4 a, smelt_vm_trig_d4 b) {
  smelt_vm_trig_d4 out;
  SMELT_VM_FLOOR_FMA(smelt_vm_trig_d4, SMELT_VM_TRIG_FMA4, SMELT_VM_TRIG_S4, a, b, out);
  return out;
}
/// |x| <= 2^31 (false for infinities and NaN): the own functions' range.
#define SMELT_VM_TRIG_SMALL(bits) (((bits)&0x7fffffffu) <= 0x4f000000u)
// One own function `name` (sin / cos, COS 0 / 1): scalar, 4, 8 and 16 lanes.
#define SMELT_VM_TRIG(name, COS)                                                                   \
  extern "C" __attribute__((target("fma"))) float Sleef_finz_##name##f1_u10purecfma(float);        \
  extern "C" __attribute__((target("avx2,fma")))                                                   \
  smelt_vm_f4 Sleef_finz_##name##f4_u10avx2128(smelt_vm_f4);                                       \
  extern "C" __attribute__((target("avx2,fma")))                                                   \
  smelt_vm_f8 Sleef_finz_##name##f8_u10avx2(smelt_vm_f8);                                          \
  extern "C" __attribute__((target("avx512f,fma")))                                                \
  smelt_vm_f16 Sleef_finz_##name##f16_u10avx512f(smelt_vm_f16);                                    \
  extern "C" __attribute__((visibility("hidden"), target("fma"))) float smelt_vm_own_##name##f1(   \
      float a) {                                                                                   \
    unsigned int bits;                                                                             \
    __builtin_memcpy(&bits, &a, sizeof bits);                                                      \
    if (!SMELT_VM_TRIG_SMALL(bits)) return Sleef_finz_##name##f1_u10purecfma(a);                   \
    const double d = a;                                                                            \
    double y;                                                                                      \
    SMELT_VM_TRIG_BODY(double, unsigned long long, SMELT_VM_TRIG_SCALAR_FMA, smelt_vm_trig_floor1, \
                       SMELT_VM_TRIG_SCALAR_S, d, COS, y);                                         \
    return static_cast<float>(y);                                                                  \
  }                                                                                                \
  extern "C" __attribute__((visibility("hidden"), target("avx2,fma")))                             \
  smelt_vm_f4 smelt_vm_own_##name##f4(smelt_vm_f4 a) {                                             \
    const smelt_vm_trig_d4 d = __builtin_convertvector(a, smelt_vm_trig_d4);                       \
    smelt_vm_trig_d4 y;                                                                            \
    SMELT_VM_TRIG_BODY(smelt_vm_trig_d4, smelt_vm_trig_u4, SMELT_VM_TRIG_FMA4,                     \
                       smelt_vm_trig_floor4, SMELT_VM_TRIG_S4, d, COS, y);                         \
    smelt_vm_f4 r = __builtin_convertvector(y, smelt_vm_f4);                                       \
    const smelt_vm_trig_i4 big =                                                                   \
        (__builtin_bit_cast(smelt_vm_trig_i4, a) & 0x7fffffffu) > 0x4f000000u;                     \
    if (__builtin_expect(__builtin_ia32_movmskps(__builtin_bit_cast(smelt_vm_f4, big)) != 0, 0))   \
      r = big ? Sleef_finz_##name##f4_u10avx2128(a) : r;                                           \
    return r;                                                                                      \
  }                                                                                                \
  extern "C" __attribute__((visibility("hidden"), target("avx2,fma")))                             \
  smelt_vm_f8 smelt_vm_own_##name##f8(smelt_vm_f8 a) {                                             \
    const smelt_vm_f4 lo = __builtin_shufflevector(a, a, 0, 1, 2, 3);                              \
    const smelt_vm_f4 hi = __builtin_shufflevector(a, a, 4, 5, 6, 7);                              \
    smelt_vm_trig_d4 yl, yh;                                                                       \
    SMELT_VM_TRIG_HALVES(smelt_vm_trig_d4, smelt_vm_trig_u4, SMELT_VM_TRIG_FMA4,                   \
                         smelt_vm_trig_floor4, SMELT_VM_TRIG_S4, SMELT_VM_TRIG_WIDEN4, lo, hi,     \
                         COS, yl, yh);                                                             \
    smelt_vm_f8 r =                                                                                \
        __builtin_shufflevector(__builtin_convertvector(yl, smelt_vm_f4),                          \
                                __builtin_convertvector(yh, smelt_vm_f4), 0, 1, 2, 3, 4, 5, 6, 7); \
    const smelt_vm_trig_i8 big =                                                                   \
        (__builtin_bit_cast(smelt_vm_trig_i8, a) & 0x7fffffffu) > 0x4f000000u;                     \
    if (__builtin_expect(__builtin_ia32_movmskps256(__builtin_bit_cast(smelt_vm_f8, big)) != 0,    \
                         0))                                                                       \
      r = big ? Sleef_finz_##name##f8_u10avx2(a) : r;                                              \
    return r;                                                                                      \
  }                                                                                                \
  extern "C" __attribute__((visibility("hidden"), target("avx512f,fma")))                          \
  smelt_vm_f16 smelt_vm_own_##name##f16(smelt_vm_f16 a) {                                          \
    const smelt_vm_f16 r = smelt::vmath::pw::trig16<COS>(a);                                       \
    if (__builtin_expect(smelt::vmath::pw::trig_big16(a) == 0, 1)) return r;                       \
    const smelt_vm_trig_i16 big =                                                                  \
        (__builtin_bit_cast(smelt_vm_trig_i16, a) & 0x7fffffffu) > 0x4f000000u;                    \
    return big ? Sleef_finz_##name##f16_u10avx512f(a) : r;                                         \
  }
SMELT_VM_TRIG(sin, 0)
SMELT_VM_TRIG(cos, 1)
#endif

// The scalar function: SLEEF's pure C ones (with the FMA instruction: purecfma).
#if defined(__x86_64__)
#define SMELT_VM_DECLARE_FMA(T, finz) extern "C" __attribute__((target("fma"))) T finz(T);
#define SMELT_VM_DECLARE_FMA2(T, finz) extern "C" __attribute__((target("fma"))) T finz(T, T);
#else
#define SMELT_VM_DECLARE_FMA(T, finz)
#define SMELT_VM_DECLARE_FMA2(T, finz)
#endif
#define SMELT_VM_SCALAR(name, T, cinz, finz)                                               \
  extern "C" T cinz(T);                                                                    \
  SMELT_VM_DECLARE_FMA(T, finz)                                                            \
  extern "C" T smelt_vm_def_##name(T) __asm__("smelt_vm_" #name);                          \
  extern "C" __attribute__((visibility(SMELT_VM_VISIBILITY))) T smelt_vm_def_##name(T a) { \
    return SMELT_VM_PICK(cinz, finz, a);                                                   \
  }
// The same for a function of two arguments (pow).
#define SMELT_VM_SCALAR2(name, T, cinz, finz)                                                   \
  extern "C" T cinz(T, T);                                                                      \
  SMELT_VM_DECLARE_FMA2(T, finz)                                                                \
  extern "C" T smelt_vm_def_##name(T, T) __asm__("smelt_vm_" #name);                            \
  extern "C" __attribute__((visibility(SMELT_VM_VISIBILITY))) T smelt_vm_def_##name(T a, T b) { \
    return SMELT_VM_PICK(cinz, finz, a, b);                                                     \
  }

#if defined(__x86_64__)
// A SLEEF vector function, declared once with the target it was built for.
#define SMELT_VM_SLEEF(V, tgt, sleef) extern "C" __attribute__((target(tgt))) V sleef(V);
// One SIMD variant: ISA letter, lanes, vector type, target, SLEEF functions
// (no FMA, FMA: the FMA one of the same lanes, whatever the variant's ISA;
// only called where the processor has AVX2 and FMA).
#define SMELT_VM_VECTOR(name, isa, lanes, V, tgt, cinz, finz)                                      \
  extern "C" V smelt_vm_def_##name##_##isa(V) __asm__("_ZGV" #isa "N" #lanes "v_smelt_vm_" #name); \
  extern "C" __attribute__((visibility(SMELT_VM_VISIBILITY), target(tgt)))                         \
  V smelt_vm_def_##name##_##isa(V a) {                                                             \
    return SMELT_VM_PICK(cinz, finz, a);                                                           \
  }
#define SMELT_VM_SLEEF2(V, tgt, sleef) extern "C" __attribute__((target(tgt))) V sleef(V, V);
#define SMELT_VM_VECTOR2(name, isa, lanes, V, tgt, cinz, finz)             \
  extern "C" V smelt_vm_def_##name##_##isa(                                \
      V, V) __asm__("_ZGV" #isa "N" #lanes "vv_smelt_vm_" #name);          \
  extern "C" __attribute__((visibility(SMELT_VM_VISIBILITY), target(tgt))) \
  V smelt_vm_def_##name##_##isa(V a, V b) {                                \
    return SMELT_VM_PICK(cinz, finz, a, b);                                \
  }
// The SLEEF functions of one type (f: float, d: double) of `name`, each width.
#define SMELT_VM_SLEEF_ALL(name, t, V4, V8, V16, n4, n8, n16)                 \
  SMELT_VM_SLEEF(V4, "sse2", Sleef_cinz_##name##t##n4##_u10sse2)              \
  SMELT_VM_SLEEF(V8, "avx", Sleef_cinz_##name##t##n8##_u10avx)                \
  SMELT_VM_SLEEF(V16, "avx512f", Sleef_cinz_##name##t##n16##_u10avx512fnofma) \
  SMELT_VM_SLEEF(V4, "avx2,fma", Sleef_finz_##name##t##n4##_u10avx2128)       \
  SMELT_VM_SLEEF(V8, "avx2,fma", Sleef_finz_##name##t##n8##_u10avx2)          \
  SMELT_VM_SLEEF(V16, "avx512f,fma", Sleef_finz_##name##t##n16##_u10avx512f)
// The SSE, AVX and AVX2 variants of one type of `name` (the 4- and 8-lane
// ones; AVX2 (d) has no no-FMA function of its own: it takes AVX's), each
// made by VARIANT (SMELT_VM_VECTOR, or SMELT_VM_VECTOR2 for two arguments).
#define SMELT_VM_VARIANTS_BCD(VARIANT, fn, name, t, V4, V8, n4, n8)  \
  VARIANT(fn, b, n4, V4, "sse2", Sleef_cinz_##name##t##n4##_u10sse2, \
          Sleef_finz_##name##t##n4##_u10avx2128)                     \
  VARIANT(fn, c, n8, V8, "avx", Sleef_cinz_##name##t##n8##_u10avx,   \
          Sleef_finz_##name##t##n8##_u10avx2)                        \
  VARIANT(fn, d, n8, V8, "avx2", Sleef_cinz_##name##t##n8##_u10avx,  \
          Sleef_finz_##name##t##n8##_u10avx2)
// Every variant of one type of `name`.
#define SMELT_VM_VARIANTS(VARIANT, fn, name, t, V4, V8, V16, n4, n8, n16)          \
  SMELT_VM_VARIANTS_BCD(VARIANT, fn, name, t, V4, V8, n4, n8)                      \
  VARIANT(fn, e, n16, V16, "avx512f", Sleef_cinz_##name##t##n16##_u10avx512fnofma, \
          Sleef_finz_##name##t##n16##_u10avx512f)
// The float (F) or double (D) function of `name`, scalar and every vector
// width, made by the scalar, SLEEF-list and variant macros of one argument
// (SMELT_VM_SCALAR, SMELT_VM_SLEEF_ALL, SMELT_VM_VECTOR) or of two
// (SMELT_VM_SCALAR2, SMELT_VM_SLEEF2_ALL, SMELT_VM_VECTOR2).
#define SMELT_VM_DEFINE_F_WITH(SCALAR, SLEEF_ALL, VECTOR, name)                             \
  SCALAR(name##f, float, Sleef_cinz_##name##f1_u10purec, Sleef_finz_##name##f1_u10purecfma) \
  SLEEF_ALL(name, f, smelt_vm_f4, smelt_vm_f8, smelt_vm_f16, 4, 8, 16)                      \
  SMELT_VM_VARIANTS(VECTOR, name##f, name, f, smelt_vm_f4, smelt_vm_f8, smelt_vm_f16, 4, 8, 16)
#define SMELT_VM_DEFINE_D_WITH(SCALAR, SLEEF_ALL, VECTOR, name)                           \
  SCALAR(name, double, Sleef_cinz_##name##d1_u10purec, Sleef_finz_##name##d1_u10purecfma) \
  SLEEF_ALL(name, d, smelt_vm_d2, smelt_vm_d4, smelt_vm_d8, 2, 4, 8)                      \
  SMELT_VM_VARIANTS(VECTOR, name, name, d, smelt_vm_d2, smelt_vm_d4, smelt_vm_d8, 2, 4, 8)
// The double function of `name`.
#define SMELT_VM_DEFINE_D(name) \
  SMELT_VM_DEFINE_D_WITH(SMELT_VM_SCALAR, SMELT_VM_SLEEF_ALL, SMELT_VM_VECTOR, name)
// The float and double functions of `name`.
#define SMELT_VM_DEFINE(name)                                                        \
  SMELT_VM_DEFINE_F_WITH(SMELT_VM_SCALAR, SMELT_VM_SLEEF_ALL, SMELT_VM_VECTOR, name) \
  SMELT_VM_DEFINE_D(name)
// The float and double functions of `name` whose FMA-family float function is
// smelt's own (smelt_vm_own_<name>f<lanes>, above): sin and cos.
#define SMELT_VM_DEFINE_OWN(name)                                                                  \
  SMELT_VM_SCALAR(name##f, float, Sleef_cinz_##name##f1_u10purec, smelt_vm_own_##name##f1)         \
  SMELT_VM_SLEEF_ALL(name, f, smelt_vm_f4, smelt_vm_f8, smelt_vm_f16, 4, 8, 16)                    \
  SMELT_VM_VECTOR(name##f, b, 4, smelt_vm_f4, "sse2", Sleef_cinz_##name##f4_u10sse2,               \
                  smelt_vm_own_##name##f4)                                                         \
  SMELT_VM_VECTOR(name##f, c, 8, smelt_vm_f8, "avx", Sleef_cinz_##name##f8_u10avx,                 \
                  smelt_vm_own_##name##f8)                                                         \
  SMELT_VM_VECTOR(name##f, d, 8, smelt_vm_f8, "avx2", Sleef_cinz_##name##f8_u10avx,                \
                  smelt_vm_own_##name##f8)                                                         \
  SMELT_VM_VECTOR(name##f, e, 16, smelt_vm_f16, "avx512f", Sleef_cinz_##name##f16_u10avx512fnofma, \
                  smelt_vm_own_##name##f16)                                                        \
  SMELT_VM_DEFINE_D(name)
// The float and double functions of `name` whose 16-lane FMA-family float
// function is piecewise_math.h's `own` (exp: exp16, SLEEF's bits in fewer
// instructions, so a vectorized JIT loop gets eager's evaluation); SLEEF's
// everywhere else.
#define SMELT_VM_DEFINE_OWN16(name, own)                                                           \
  SMELT_VM_SCALAR(name##f, float, Sleef_cinz_##name##f1_u10purec,                                  \
                  Sleef_finz_##name##f1_u10purecfma)                                               \
  SMELT_VM_SLEEF_ALL(name, f, smelt_vm_f4, smelt_vm_f8, smelt_vm_f16, 4, 8, 16)                    \
  extern "C" __attribute__((visibility("hidden"), target("avx512f,fma")))                          \
  smelt_vm_f16 smelt_vm_own_##name##f16(smelt_vm_f16 a) {                                          \
    return smelt::vmath::pw::own(a);                                                               \
  }                                                                                                \
  SMELT_VM_VARIANTS_BCD(SMELT_VM_VECTOR, name##f, name, f, smelt_vm_f4, smelt_vm_f8, 4, 8)         \
  SMELT_VM_VECTOR(name##f, e, 16, smelt_vm_f16, "avx512f", Sleef_cinz_##name##f16_u10avx512fnofma, \
                  smelt_vm_own_##name##f16)                                                        \
  SMELT_VM_DEFINE_D(name)
// The same for a function of two arguments (pow): float and double, scalar
// and every vector width.
#define SMELT_VM_SLEEF2_ALL(name, t, V4, V8, V16, n4, n8, n16)                 \
  SMELT_VM_SLEEF2(V4, "sse2", Sleef_cinz_##name##t##n4##_u10sse2)              \
  SMELT_VM_SLEEF2(V8, "avx", Sleef_cinz_##name##t##n8##_u10avx)                \
  SMELT_VM_SLEEF2(V16, "avx512f", Sleef_cinz_##name##t##n16##_u10avx512fnofma) \
  SMELT_VM_SLEEF2(V4, "avx2,fma", Sleef_finz_##name##t##n4##_u10avx2128)       \
  SMELT_VM_SLEEF2(V8, "avx2,fma", Sleef_finz_##name##t##n8##_u10avx2)          \
  SMELT_VM_SLEEF2(V16, "avx512f,fma", Sleef_finz_##name##t##n16##_u10avx512f)
#define SMELT_VM_DEFINE2(name)                                                          \
  SMELT_VM_DEFINE_F_WITH(SMELT_VM_SCALAR2, SMELT_VM_SLEEF2_ALL, SMELT_VM_VECTOR2, name) \
  SMELT_VM_DEFINE_D_WITH(SMELT_VM_SCALAR2, SMELT_VM_SLEEF2_ALL, SMELT_VM_VECTOR2, name)
#else
#define SMELT_VM_DEFINE2(name)                                     \
  SMELT_VM_SCALAR2(name##f, float, Sleef_cinz_##name##f1_u10purec, \
                   Sleef_finz_##name##f1_u10purecfma)              \
  SMELT_VM_SCALAR2(name, double, Sleef_cinz_##name##d1_u10purec, Sleef_finz_##name##d1_u10purecfma)
#define SMELT_VM_DEFINE_D(name) \
  SMELT_VM_SCALAR(name, double, Sleef_cinz_##name##d1_u10purec, Sleef_finz_##name##d1_u10purecfma)
#define SMELT_VM_DEFINE(name)                                     \
  SMELT_VM_SCALAR(name##f, float, Sleef_cinz_##name##f1_u10purec, \
                  Sleef_finz_##name##f1_u10purecfma)              \
  SMELT_VM_DEFINE_D(name)
#define SMELT_VM_DEFINE_OWN(name) SMELT_VM_DEFINE(name)
#define SMELT_VM_DEFINE_OWN16(name, own) SMELT_VM_DEFINE(name)
#endif

SMELT_VM_DEFINE_OWN16(exp, exp16)
SMELT_VM_DEFINE(exp2)
SMELT_VM_DEFINE(expm1)
SMELT_VM_DEFINE_D(log)
SMELT_VM_DEFINE(log2)
SMELT_VM_DEFINE(log1p)
SMELT_VM_DEFINE_OWN(sin)
SMELT_VM_DEFINE_OWN(cos)
SMELT_VM_DEFINE(tan)
SMELT_VM_DEFINE_D(tanh)
SMELT_VM_DEFINE_D(erf)
#if defined(__x86_64__)
// pow: the double function here, the float one below (smelt's own on AVX-512F).
SMELT_VM_DEFINE_D_WITH(SMELT_VM_SCALAR2, SMELT_VM_SLEEF2_ALL, SMELT_VM_VECTOR2, pow)
#else
SMELT_VM_DEFINE2(pow)
#endif

// float tanh and erf: the AVX-512F piecewise polynomials (piecewise_math.h)
// where the processor has AVX-512F (smelt_vm_pw: the hardware alone, decided
// once), else vmath::f32's functions; every width and the scalar function
// through the same 16-lane evaluation (the narrower ones pass their lanes
// through a buffer), so all give the same bits. The f32 fallback's lanes are
// computed one by one in a loop the compiler vectorizes, with the FMA
// instruction where the processor has it (smelt_vm_fma) and libm's fmaf
// elsewhere (the same bits).
#if defined(__x86_64__)
static inline bool smelt_vm_pw() {
  static int state = -1;
  return smelt_vm_cpu_once(&state, [] { return __builtin_cpu_supports("avx512f") ? 1 : 0; });
}
extern "C" __attribute__((visibility(SMELT_VM_VISIBILITY))) int smelt_vm_piecewise() noexcept {
  return smelt_vm_pw() ? 1 : 0;
}
// f32's function on each of the lanes of a, with the target `tgt`.
#define SMELT_VM_PW_LANES(name, V, lanes, tgt, f32fn)                    \
  static __attribute__((target(tgt))) V smelt_vm_own_lanes_##name(V a) { \
    float in[lanes], out[lanes];                                         \
    __builtin_memcpy(in, &a, sizeof in);                                 \
    for (int i = 0; i < lanes; ++i) out[i] = f32fn(in[i]);               \
    V r;                                                                 \
    __builtin_memcpy(&r, out, sizeof r);                                 \
    return r;                                                            \
  }
// One narrow variant (ISA letter, lanes, vector type, target): the piecewise
// function through a buffer, else f32's function lane by lane.
#define SMELT_VM_PW_VECTOR(name, isa, lanes, V, tgt, f32fn)                                        \
  SMELT_VM_PW_LANES(name##_##isa, V, lanes, tgt, f32fn)                                            \
  SMELT_VM_PW_LANES(name##_##isa##_fma, V, lanes, tgt ",fma", f32fn)                               \
  extern "C" V smelt_vm_def_##name##_##isa(V) __asm__("_ZGV" #isa "N" #lanes "v_smelt_vm_" #name); \
  extern "C" __attribute__((visibility(SMELT_VM_VISIBILITY), target(tgt)))                         \
  V smelt_vm_def_##name##_##isa(V a) {                                                             \
    if (smelt_vm_pw()) {                                                                           \
      float buf[lanes];                                                                            \
      __builtin_memcpy(buf, &a, sizeof buf);                                                       \
      smelt_vm_own_##name##_n(buf, buf, lanes);                                                    \
      __builtin_memcpy(&a, buf, sizeof buf);                                                       \
      return a;                                                                                    \
    }                                                                                              \
    return smelt_vm_fma() ? smelt_vm_own_lanes_##name##_##isa##_fma(a)                             \
                          : smelt_vm_own_lanes_##name##_##isa(a);                                  \
  }
// The function `name` (tanhf / erff) of f32's `fn` and piecewise_math.h's `fn`16:
// the whole run, the scalar function and every vector variant (the 16-lane
// one only runs on a processor with AVX-512F, so always piecewise).
#define SMELT_VM_PW_DEFINE(name, fn)                                                               \
  extern "C"                                                                                       \
      __attribute__((visibility(SMELT_VM_VISIBILITY),                                              \
                     target("avx512f"))) void smelt_vm_own_##name##_n(float* y, const float* x,    \
                                                                      int64_t n) noexcept {        \
    smelt::vmath::pw::run16<smelt::vmath::pw::fn##16>(y, x, n);                                    \
  }                                                                                                \
  static __attribute__((target("fma"))) float smelt_vm_own_fma_##name(float a) {                   \
    return smelt::vmath::f32::fn(a);                                                               \
  }                                                                                                \
  extern "C" float smelt_vm_def_##name(float) __asm__("smelt_vm_" #name);                          \
  extern "C" __attribute__((visibility(SMELT_VM_VISIBILITY))) float smelt_vm_def_##name(float a) { \
    if (smelt_vm_pw()) {                                                                           \
      smelt_vm_own_##name##_n(&a, &a, 1);                                                          \
      return a;                                                                                    \
    }                                                                                              \
    return smelt_vm_fma() ? smelt_vm_own_fma_##name(a) : smelt::vmath::f32::fn(a);                 \
  }                                                                                                \
  SMELT_VM_PW_VECTOR(name, b, 4, smelt_vm_f4, "sse2", smelt::vmath::f32::fn)                       \
  SMELT_VM_PW_VECTOR(name, c, 8, smelt_vm_f8, "avx", smelt::vmath::f32::fn)                        \
  SMELT_VM_PW_VECTOR(name, d, 8, smelt_vm_f8, "avx2", smelt::vmath::f32::fn)                       \
  extern "C" smelt_vm_f16 smelt_vm_def_##name##_e(smelt_vm_f16) __asm__(                           \
      "_ZGVeN16v_smelt_vm_" #name);                                                                \
  extern "C" __attribute__((visibility(SMELT_VM_VISIBILITY), target("avx512f")))                   \
  smelt_vm_f16 smelt_vm_def_##name##_e(smelt_vm_f16 a) {                                           \
    return smelt::vmath::pw::fn##16(a);                                                            \
  }
SMELT_VM_PW_DEFINE(tanhf, tanh)
SMELT_VM_PW_DEFINE(erff, erf)
#undef SMELT_VM_PW_DEFINE
#undef SMELT_VM_PW_VECTOR
#undef SMELT_VM_PW_LANES

// float pow: piecewise_math.h's pow16 where the processor has AVX-512F and FMA
// (decided once, from the hardware), SLEEF's finz for the lanes it does not
// cover (x not a positive normal float, y not finite, |y log2 x| >= 1000: C99's
// special cases, zeros, negative bases, subnormals, overflow and underflow
// far out); the narrower widths and the scalar function through a 16-lane
// buffer (padded with 1^1), so every width gives the same bits. Elsewhere
// SLEEF's, as the other functions. Eager x ** 2.5 of 512x1024 floats, one
// thread of a 2-core AMD EPYC: 1.239 ms with SLEEF's finz powf16 (which
// divides twice), 0.814 through this 16-lane function (two double-lane halves
// of multiply-adds), 0.626 with eager's whole-block kernel (pow_run).
SMELT_VM_SLEEF2_ALL(pow, f, smelt_vm_f4, smelt_vm_f8, smelt_vm_f16, 4, 8, 16)
extern "C" float Sleef_cinz_powf1_u10purec(float, float);
extern "C" __attribute__((target("fma"))) float Sleef_finz_powf1_u10purecfma(float, float);
static __attribute__((target("avx512f,fma"))) smelt_vm_f16 smelt_vm_own_powf16(smelt_vm_f16 a,
                                                                               smelt_vm_f16 b) {
  namespace pw = smelt::vmath::pw;
  unsigned short other;
  const smelt_vm_f16 r = __builtin_bit_cast(
      smelt_vm_f16,
      pw::pow16(__builtin_bit_cast(pw::F16, a), __builtin_bit_cast(pw::F16, b), &other));
  if (__builtin_expect(other == 0, 1)) return r;
  const smelt_vm_f16 sleef = Sleef_finz_powf16_u10avx512f(a, b);
  float out[16], alt[16];
  __builtin_memcpy(out, &r, sizeof out);
  __builtin_memcpy(alt, &sleef, sizeof alt);
  for (int i = 0; i < 16; ++i)
    if ((other >> i) & 1) out[i] = alt[i];
  smelt_vm_f16 y;
  __builtin_memcpy(&y, out, sizeof y);
  return y;
}
/// y[i] = a[i]^b[i] for i < n <= 16 through one 16-lane evaluation.
static __attribute__((target("avx512f,fma"))) void smelt_vm_own_powf_n(float* y, const float* a,
                                                                       const float* b, int n) {
  smelt_vm_f16 va = smelt_vm_f16{} + 1.0f, vb = va;
  __builtin_memcpy(&va, a, sizeof(float) * n);
  __builtin_memcpy(&vb, b, sizeof(float) * n);
  const smelt_vm_f16 r = smelt_vm_own_powf16(va, vb);
  __builtin_memcpy(y, &r, sizeof(float) * n);
}
static inline bool smelt_vm_own_pow() { return smelt_vm_pw() && smelt_vm_fma(); }
extern "C" float smelt_vm_def_powf(float, float) __asm__("smelt_vm_powf");
extern "C" __attribute__((visibility(SMELT_VM_VISIBILITY))) float smelt_vm_def_powf(float a,
                                                                                    float b) {
  if (smelt_vm_own_pow()) {
    float r;
    smelt_vm_own_powf_n(&r, &a, &b, 1);
    return r;
  }
  return SMELT_VM_PICK(Sleef_cinz_powf1_u10purec, Sleef_finz_powf1_u10purecfma, a, b);
}
// One narrow variant (ISA letter, lanes, vector type, target, SLEEF's functions).
#define SMELT_VM_POW_VECTOR(isa, lanes, V, tgt, cinz, finz)                                      \
  extern "C" V smelt_vm_def_powf_##isa(V, V) __asm__("_ZGV" #isa "N" #lanes "vv_smelt_vm_powf"); \
  extern "C" __attribute__((visibility(SMELT_VM_VISIBILITY), target(tgt)))                       \
  V smelt_vm_def_powf_##isa(V a, V b) {                                                          \
    if (smelt_vm_own_pow()) {                                                                    \
      float fa[lanes], fb[lanes], fr[lanes];                                                     \
      __builtin_memcpy(fa, &a, sizeof fa);                                                       \
      __builtin_memcpy(fb, &b, sizeof fb);                                                       \
      smelt_vm_own_powf_n(fr, fa, fb, lanes);                                                    \
      V r;                                                                                       \
      __builtin_memcpy(&r, fr, sizeof r);                                                        \
      return r;                                                                                  \
    }                                                                                            \
    return SMELT_VM_PICK(cinz, finz, a, b);                                                      \
  }
SMELT_VM_POW_VECTOR(b, 4, smelt_vm_f4, "sse2", Sleef_cinz_powf4_u10sse2,
                    Sleef_finz_powf4_u10avx2128)
SMELT_VM_POW_VECTOR(c, 8, smelt_vm_f8, "avx", Sleef_cinz_powf8_u10avx, Sleef_finz_powf8_u10avx2)
SMELT_VM_POW_VECTOR(d, 8, smelt_vm_f8, "avx2", Sleef_cinz_powf8_u10avx, Sleef_finz_powf8_u10avx2)
#undef SMELT_VM_POW_VECTOR
extern "C" smelt_vm_f16 smelt_vm_def_powf_e(smelt_vm_f16,
                                            smelt_vm_f16) __asm__("_ZGVeN16vv_smelt_vm_powf");
extern "C" __attribute__((visibility(SMELT_VM_VISIBILITY), target("avx512f"))) smelt_vm_f16
smelt_vm_def_powf_e(smelt_vm_f16 a, smelt_vm_f16 b) {
  return smelt_vm_fma() ? smelt_vm_own_powf16(a, b) : Sleef_cinz_powf16_u10avx512fnofma(a, b);
}
#else
extern "C" int smelt_vm_piecewise() noexcept { return 0; }
extern "C" void smelt_vm_own_tanhf_n(float*, const float*, int64_t) noexcept {}
extern "C" void smelt_vm_own_erff_n(float*, const float*, int64_t) noexcept {}
extern "C" float smelt_vm_def_tanhf(float) __asm__("smelt_vm_tanhf");
extern "C" float smelt_vm_def_tanhf(float a) { return smelt::vmath::f32::tanh(a); }
extern "C" float smelt_vm_def_erff(float) __asm__("smelt_vm_erff");
extern "C" float smelt_vm_def_erff(float a) { return smelt::vmath::f32::erf(a); }
#endif

#undef SMELT_VM_DEFINE2
#undef SMELT_VM_DEFINE_OWN
#undef SMELT_VM_DEFINE_OWN16
#undef SMELT_VM_SLEEF2_ALL
#undef SMELT_VM_VECTOR2
#undef SMELT_VM_SLEEF2
#undef SMELT_VM_SCALAR2
#undef SMELT_VM_DECLARE_FMA2
#undef SMELT_VM_DEFINE
#undef SMELT_VM_DEFINE_D
#undef SMELT_VM_DEFINE_F_WITH
#undef SMELT_VM_DEFINE_D_WITH
#undef SMELT_VM_VARIANTS
#undef SMELT_VM_VARIANTS_BCD
#undef SMELT_VM_SLEEF_ALL
#undef SMELT_VM_VECTOR
#undef SMELT_VM_SLEEF
#undef SMELT_VM_SCALAR
#undef SMELT_VM_PICK
#undef SMELT_VM_DECLARE_FMA
#undef SMELT_VM_TRIG
#undef SMELT_VM_TRIG_BODY
#undef SMELT_VM_TRIG_SMALL
#undef SMELT_VM_TRIG_SCALAR_S
#undef SMELT_VM_TRIG_SCALAR_FMA
#undef SMELT_VM_TRIG_S4
#undef SMELT_VM_TRIG_FMA4
#undef SMELT_VM_TRIG_WIDEN4
#undef SMELT_VM_TRIG_HALVES
#undef SMELT_VM_FLOOR_FMA
#endif
