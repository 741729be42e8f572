// smelt/kernels/vector_math_impl.h — the definitions behind vector_math.h: the
// scalar functions and, on x86-64, their SIMD variants under the x86-64 vector
// function ABI names that GCC's vectorizer calls (b = SSE, c = AVX, d = AVX2,
// e = AVX-512; N<lanes>v = that many lanes of one vector argument). Every one
// calls SLEEF's deterministic no-FMA ("cinz") function of accuracy u10, so all
// give the same bits for the same input (vector_math.h says why).
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
#define SMELT_VM_SCALAR(name, T, sleef)                                                    \
  extern "C" T sleef(T);                                                                   \
  extern "C" T smelt_vm_def_##name(T) __asm__("smelt_vm_" #name);                          \
  extern "C" __attribute__((visibility(SMELT_VM_VISIBILITY))) T smelt_vm_def_##name(T a) { \
    return sleef(a);                                                                       \
  }

#if defined(__x86_64__)
// A SLEEF vector function, declared once with the target it was built for.
#define SMELT_VM_SLEEF(V, tgt, sleef) extern "C" __attribute__((target(tgt))) V sleef(V);
// One SIMD variant: ISA letter, lanes, vector type, target, SLEEF function.
#define SMELT_VM_VECTOR(name, isa, lanes, V, tgt, sleef)                                           \
  extern "C" V smelt_vm_def_##name##_##isa(V) __asm__("_ZGV" #isa "N" #lanes "v_smelt_vm_" #name); \
  extern "C" __attribute__((visibility(SMELT_VM_VISIBILITY), target(tgt)))                         \
  V smelt_vm_def_##name##_##isa(V a) {                                                             \
    return sleef(a);                                                                               \
  }
// The float (f) and double functions of `name`, scalar and every vector width.
// AVX2 (d) has no deterministic variant of its own: it takes AVX's (FMA would
// round differently from the scalar code).
#define SMELT_VM_DEFINE(name)                                                                      \
  SMELT_VM_SCALAR(name##f, float, Sleef_cinz_##name##f1_u10purec)                                  \
  SMELT_VM_SCALAR(name, double, Sleef_cinz_##name##d1_u10purec)                                    \
  SMELT_VM_SLEEF(smelt_vm_f4, "sse2", Sleef_cinz_##name##f4_u10sse2)                               \
  SMELT_VM_SLEEF(smelt_vm_f8, "avx", Sleef_cinz_##name##f8_u10avx)                                 \
  SMELT_VM_SLEEF(smelt_vm_f16, "avx512f", Sleef_cinz_##name##f16_u10avx512fnofma)                  \
  SMELT_VM_SLEEF(smelt_vm_d2, "sse2", Sleef_cinz_##name##d2_u10sse2)                               \
  SMELT_VM_SLEEF(smelt_vm_d4, "avx", Sleef_cinz_##name##d4_u10avx)                                 \
  SMELT_VM_SLEEF(smelt_vm_d8, "avx512f", Sleef_cinz_##name##d8_u10avx512fnofma)                    \
  SMELT_VM_VECTOR(name##f, b, 4, smelt_vm_f4, "sse2", Sleef_cinz_##name##f4_u10sse2)               \
  SMELT_VM_VECTOR(name##f, c, 8, smelt_vm_f8, "avx", Sleef_cinz_##name##f8_u10avx)                 \
  SMELT_VM_VECTOR(name##f, d, 8, smelt_vm_f8, "avx2", Sleef_cinz_##name##f8_u10avx)                \
  SMELT_VM_VECTOR(name##f, e, 16, smelt_vm_f16, "avx512f", Sleef_cinz_##name##f16_u10avx512fnofma) \
  SMELT_VM_VECTOR(name, b, 2, smelt_vm_d2, "sse2", Sleef_cinz_##name##d2_u10sse2)                  \
  SMELT_VM_VECTOR(name, c, 4, smelt_vm_d4, "avx", Sleef_cinz_##name##d4_u10avx)                    \
  SMELT_VM_VECTOR(name, d, 4, smelt_vm_d4, "avx2", Sleef_cinz_##name##d4_u10avx)                   \
  SMELT_VM_VECTOR(name, e, 8, smelt_vm_d8, "avx512f", Sleef_cinz_##name##d8_u10avx512fnofma)
// The double function of `name` only (float erf and tanh are vector_math.h's).
#define SMELT_VM_DEFINE_D(name)                                                   \
  SMELT_VM_SCALAR(name, double, Sleef_cinz_##name##d1_u10purec)                   \
  SMELT_VM_SLEEF(smelt_vm_d2, "sse2", Sleef_cinz_##name##d2_u10sse2)              \
  SMELT_VM_SLEEF(smelt_vm_d4, "avx", Sleef_cinz_##name##d4_u10avx)                \
  SMELT_VM_SLEEF(smelt_vm_d8, "avx512f", Sleef_cinz_##name##d8_u10avx512fnofma)   \
  SMELT_VM_VECTOR(name, b, 2, smelt_vm_d2, "sse2", Sleef_cinz_##name##d2_u10sse2) \
  SMELT_VM_VECTOR(name, c, 4, smelt_vm_d4, "avx", Sleef_cinz_##name##d4_u10avx)   \
  SMELT_VM_VECTOR(name, d, 4, smelt_vm_d4, "avx2", Sleef_cinz_##name##d4_u10avx)  \
  SMELT_VM_VECTOR(name, e, 8, smelt_vm_d8, "avx512f", Sleef_cinz_##name##d8_u10avx512fnofma)
#else
#define SMELT_VM_DEFINE(name)                                     \
  SMELT_VM_SCALAR(name##f, float, Sleef_cinz_##name##f1_u10purec) \
  SMELT_VM_SCALAR(name, double, Sleef_cinz_##name##d1_u10purec)
#define SMELT_VM_DEFINE_D(name) SMELT_VM_SCALAR(name, double, Sleef_cinz_##name##d1_u10purec)
#endif

SMELT_VM_DEFINE(exp)
SMELT_VM_DEFINE(exp2)
SMELT_VM_DEFINE(expm1)
SMELT_VM_DEFINE(log)
SMELT_VM_DEFINE(log2)
SMELT_VM_DEFINE(log1p)
SMELT_VM_DEFINE(sin)
SMELT_VM_DEFINE(cos)
SMELT_VM_DEFINE(tan)
SMELT_VM_DEFINE_D(tanh)
SMELT_VM_DEFINE_D(erf)

#undef SMELT_VM_DEFINE
#undef SMELT_VM_DEFINE_D
#undef SMELT_VM_VECTOR
#undef SMELT_VM_SLEEF
#undef SMELT_VM_SCALAR
#endif
