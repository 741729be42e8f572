// smelt/kernels/vector_math.h — the transcendental functions of scalar_ops.h
// (exp, exp2, expm1, log, log2, log1p, sin, cos, tan, tanh, erf), one
// implementation for every CPU code path.
//
// Why: a loop the C++ compiler vectorizes calls a SIMD variant of a math
// function, its scalar remainder calls the scalar one. With glibc's libm and
// libmvec these differ by an ulp or more, so one element's value depended on
// where it sat in a loop, and compiled kernels (which recompute an inlined
// producer in several passes or kernels) disagreed with eager and with
// themselves (layer_norm of a row of equal values gave 1.9e-5 instead of 0).
// Here every path computes SLEEF's deterministic functions (the "cinz"
// family: u10 = at most 1.0 ulp of error, no FMA), which give bit-identical
// results in scalar code and in every vector width (SSE2, AVX, AVX-512).
// Source: SLEEF 3.5 (https://sleef.org), "deterministic" variants (PR #204).
//
// Host code calls smelt_vm_<name>f / smelt_vm_<name> (float / double). On
// GCC for x86-64 they are declared `simd`, so loops calling them vectorize
// through the variants vector_math_impl.h defines under the x86-64 vector
// function ABI names (_ZGV{b,c,d,e}N<lanes>v_<name>). CUDA device code calls
// CUDA's own math functions. Embedded verbatim into JIT code like scalar_ops.h.
#pragma once

#include "smelt/half.h"

#if !defined(__CUDA_ARCH__)
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define SMELT_VM_DECL __attribute__((simd("notinbranch"), const, nothrow))
#else
#define SMELT_VM_DECL
#endif
#define SMELT_VM_DECLARE(name)                            \
  SMELT_VM_DECL float smelt_vm_##name##f(float) noexcept; \
  SMELT_VM_DECL double smelt_vm_##name(double) noexcept;
extern "C" {
SMELT_VM_DECLARE(exp)
SMELT_VM_DECLARE(exp2)
SMELT_VM_DECLARE(expm1)
SMELT_VM_DECLARE(log)
SMELT_VM_DECLARE(log2)
SMELT_VM_DECLARE(log1p)
SMELT_VM_DECLARE(sin)
SMELT_VM_DECLARE(cos)
SMELT_VM_DECLARE(tan)
SMELT_VM_DECLARE(tanh)
SMELT_VM_DECLARE(erf)
}
#undef SMELT_VM_DECLARE
#endif

namespace smelt {
namespace vmath {

#if defined(__CUDA_ARCH__)
#define SMELT_VM_FUNCTION(name)                         \
  SMELT_HD float name(float a) { return ::name##f(a); } \
  SMELT_HD double name(double a) { return ::name(a); }
#else
#define SMELT_VM_FUNCTION(name)                                    \
  SMELT_HD float name(float a) { return ::smelt_vm_##name##f(a); } \
  SMELT_HD double name(double a) { return ::smelt_vm_##name(a); }
#endif
SMELT_VM_FUNCTION(exp)
SMELT_VM_FUNCTION(exp2)
SMELT_VM_FUNCTION(expm1)
SMELT_VM_FUNCTION(log)
SMELT_VM_FUNCTION(log2)
SMELT_VM_FUNCTION(log1p)
SMELT_VM_FUNCTION(sin)
SMELT_VM_FUNCTION(cos)
SMELT_VM_FUNCTION(tan)
SMELT_VM_FUNCTION(tanh)
SMELT_VM_FUNCTION(erf)
#undef SMELT_VM_FUNCTION

}  // namespace vmath
}  // namespace smelt
