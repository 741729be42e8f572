// The scalar and SIMD math functions of vector_math.h, compiled into the
// library for the eager kernels (JIT code embeds its own copy).
#include "kernels/vector_math.h"

#include "kernels/vector_math_impl.h"
