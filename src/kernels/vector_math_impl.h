// smelt/kernels/vector_math_impl.h — the definitions behind vector_math.h: the
// scalar functions and, on x86-64, their SIMD variants under the x86-64 vector
// function ABI names that GCC's vectorizer calls (b = SSE, c = AVX, d = AVX2,
// e = AVX-512; N<lanes>v = that many lanes of one vector argument). Every one
// calls SLEEF's deterministic function of accuracy u10 of one family, the FMA
// one ("finz") where the processor has AVX2 and FMA and the no-FMA one
// ("cinz") elsewhere (smelt_vm_fma), so all give the same bits for the same
// input (vector_math.h says why).
//
// Compiled once into libsmelt (src/kernels/vector_math.cpp, exported) and
// embedded into every JIT translation unit (with SMELT_VM_VISIBILITY hidden,
// so each kernel library binds to its own copy). The definitions take their
// ABI symbol names through asm labels, so the C++ compiler does not confuse
// them with the `simd`-declared functions whose variants they are.
#pragma once

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
static inline bool smelt_vm_fma() {
  static int state = -1;  // constant-initialized: valid before any constructor
  int s = __atomic_load_n(&state, __ATOMIC_RELAXED);
  if (s < 0) {
    __builtin_cpu_init();
    s = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? 1 : 0;
    __atomic_store_n(&state, s, __ATOMIC_RELAXED);
  }
  return s != 0;
}
#define SMELT_VM_PICK(cinz, finz, ...) (smelt_vm_fma() ? finz(__VA_ARGS__) : cinz(__VA_ARGS__))
#else
#define SMELT_VM_PICK(cinz, finz, ...) cinz(__VA_ARGS__)
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
// Every variant of one type of `name` (AVX2 (d) has no no-FMA function of its
// own: it takes AVX's).
#define SMELT_VM_VECTORS(fn, name, t, V4, V8, V16, n4, n8, n16)                            \
  SMELT_VM_VECTOR(fn, b, n4, V4, "sse2", Sleef_cinz_##name##t##n4##_u10sse2,               \
                  Sleef_finz_##name##t##n4##_u10avx2128)                                   \
  SMELT_VM_VECTOR(fn, c, n8, V8, "avx", Sleef_cinz_##name##t##n8##_u10avx,                 \
                  Sleef_finz_##name##t##n8##_u10avx2)                                      \
  SMELT_VM_VECTOR(fn, d, n8, V8, "avx2", Sleef_cinz_##name##t##n8##_u10avx,                \
                  Sleef_finz_##name##t##n8##_u10avx2)                                      \
  SMELT_VM_VECTOR(fn, e, n16, V16, "avx512f", Sleef_cinz_##name##t##n16##_u10avx512fnofma, \
                  Sleef_finz_##name##t##n16##_u10avx512f)
// The double function of `name`, scalar and every vector width.
#define SMELT_VM_DEFINE_D(name)                                                                    \
  SMELT_VM_SCALAR(name, double, Sleef_cinz_##name##d1_u10purec, Sleef_finz_##name##d1_u10purecfma) \
  SMELT_VM_SLEEF_ALL(name, d, smelt_vm_d2, smelt_vm_d4, smelt_vm_d8, 2, 4, 8)                      \
  SMELT_VM_VECTORS(name, name, d, smelt_vm_d2, smelt_vm_d4, smelt_vm_d8, 2, 4, 8)
// The float (f) and double functions of `name`, scalar and every vector width.
#define SMELT_VM_DEFINE(name)                                                          \
  SMELT_VM_SCALAR(name##f, float, Sleef_cinz_##name##f1_u10purec,                      \
                  Sleef_finz_##name##f1_u10purecfma)                                   \
  SMELT_VM_SLEEF_ALL(name, f, smelt_vm_f4, smelt_vm_f8, smelt_vm_f16, 4, 8, 16)        \
  SMELT_VM_VECTORS(name##f, name, f, smelt_vm_f4, smelt_vm_f8, smelt_vm_f16, 4, 8, 16) \
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
#define SMELT_VM_VECTORS2(fn, name, t, V4, V8, V16, n4, n8, n16)                            \
  SMELT_VM_VECTOR2(fn, b, n4, V4, "sse2", Sleef_cinz_##name##t##n4##_u10sse2,               \
                   Sleef_finz_##name##t##n4##_u10avx2128)                                   \
  SMELT_VM_VECTOR2(fn, c, n8, V8, "avx", Sleef_cinz_##name##t##n8##_u10avx,                 \
                   Sleef_finz_##name##t##n8##_u10avx2)                                      \
  SMELT_VM_VECTOR2(fn, d, n8, V8, "avx2", Sleef_cinz_##name##t##n8##_u10avx,                \
                   Sleef_finz_##name##t##n8##_u10avx2)                                      \
  SMELT_VM_VECTOR2(fn, e, n16, V16, "avx512f", Sleef_cinz_##name##t##n16##_u10avx512fnofma, \
                   Sleef_finz_##name##t##n16##_u10avx512f)
#define SMELT_VM_DEFINE2(name)                                                          \
  SMELT_VM_SCALAR2(name##f, float, Sleef_cinz_##name##f1_u10purec,                      \
                   Sleef_finz_##name##f1_u10purecfma)                                   \
  SMELT_VM_SLEEF2_ALL(name, f, smelt_vm_f4, smelt_vm_f8, smelt_vm_f16, 4, 8, 16)        \
  SMELT_VM_VECTORS2(name##f, name, f, smelt_vm_f4, smelt_vm_f8, smelt_vm_f16, 4, 8, 16) \
  SMELT_VM_SCALAR2(name, double, Sleef_cinz_##name##d1_u10purec,                        \
                   Sleef_finz_##name##d1_u10purecfma)                                   \
  SMELT_VM_SLEEF2_ALL(name, d, smelt_vm_d2, smelt_vm_d4, smelt_vm_d8, 2, 4, 8)          \
  SMELT_VM_VECTORS2(name, name, d, smelt_vm_d2, smelt_vm_d4, smelt_vm_d8, 2, 4, 8)
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
#endif

SMELT_VM_DEFINE(exp)
SMELT_VM_DEFINE(exp2)
SMELT_VM_DEFINE(expm1)
SMELT_VM_DEFINE_D(log)
SMELT_VM_DEFINE(log2)
SMELT_VM_DEFINE(log1p)
SMELT_VM_DEFINE(sin)
SMELT_VM_DEFINE(cos)
SMELT_VM_DEFINE(tan)
SMELT_VM_DEFINE_D(tanh)
SMELT_VM_DEFINE_D(erf)
SMELT_VM_DEFINE2(pow)

#undef SMELT_VM_DEFINE2
#undef SMELT_VM_VECTORS2
#undef SMELT_VM_SLEEF2_ALL
#undef SMELT_VM_VECTOR2
#undef SMELT_VM_SLEEF2
#undef SMELT_VM_SCALAR2
#undef SMELT_VM_DECLARE_FMA2
#undef SMELT_VM_DEFINE
#undef SMELT_VM_DEFINE_D
#undef SMELT_VM_VECTORS
#undef SMELT_VM_SLEEF_ALL
#undef SMELT_VM_VECTOR
#undef SMELT_VM_SLEEF
#undef SMELT_VM_SCALAR
#undef SMELT_VM_PICK
#undef SMELT_VM_DECLARE_FMA
#endif
