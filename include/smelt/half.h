// smelt/half.h — 16-bit floating-point storage types (IEEE binary16 and bfloat16).
//
// Both are storage types: arithmetic converts to float, computes, and rounds back
// (round-to-nearest-even), which is what PyTorch does on the CPU. This header is
// self-contained (no smelt includes) because it is also embedded, verbatim, into
// JIT-generated C++ and CUDA source.
//
// GPU code of compute capability 8.0 and later converts with the hardware's
// cvt instructions (one instruction where the portable code below takes about
// ten): they round to nearest even and keep subnormals exactly as the portable
// code does; only NaN differs (the hardware gives the canonical NaN), so a NaN
// takes the portable result (sign and payload kept): the same bits on every
// device.
#pragma once
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define SMELT_HD __host__ __device__ __forceinline__
#else
#define SMELT_HD inline
#endif

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define SMELT_HALF_CVT_HW 1
#else
#define SMELT_HALF_CVT_HW 0
#endif

namespace smelt {

namespace half_detail {
SMELT_HD uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
SMELT_HD float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}
}  // namespace half_detail

/// IEEE 754 binary16: 1 sign, 5 exponent, 10 mantissa bits; max 65504.
struct Half {
  uint16_t x = 0;
  Half() = default;
  SMELT_HD Half(float f) : x(from_float(f)) {}
  SMELT_HD operator float() const { return to_float(x); }
  static SMELT_HD Half from_bits(uint16_t b) {
    Half h;
    h.x = b;
    return h;
  }

  // Round-to-nearest-even float -> binary16 (handles subnormals, inf, NaN).
  static SMELT_HD uint16_t from_float(float f) {
#if SMELT_HALF_CVT_HW
    const uint32_t u = half_detail::float_bits(f);
    uint16_t h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
    return (u & 0x7fffffffu) > 0x7f800000u ? static_cast<uint16_t>(((u >> 16) & 0x8000u) | 0x7e00u)
                                           : h;
#else
    return from_float_portable(f);
#endif
  }
  static SMELT_HD uint16_t from_float_portable(float f) {
    uint32_t u = half_detail::float_bits(f);
    uint32_t sign = (u >> 16) & 0x8000u;
    uint32_t absu = u & 0x7fffffffu;
    if (absu >= 0x7f800000u) {  // inf or NaN
      return static_cast<uint16_t>(sign | (absu > 0x7f800000u ? 0x7e00u : 0x7c00u));
    }
    if (absu >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow -> inf
    if (absu < 0x38800000u) {  // subnormal or zero in half
      uint32_t mant = (absu & 0x7fffffu) | 0x800000u;
      int e = static_cast<int>(absu >> 23);
      if (e == 0) return static_cast<uint16_t>(sign);  // float subnormal -> 0
      int shift = 126 - e;                             // bits to drop beyond 13
      // half subnormal value = mant * 2^(e-150) / 2^-24 = mant >> (126 - e)
      if (shift > 24) return static_cast<uint16_t>(sign);
      uint32_t q = mant >> shift;
      uint32_t rem = mant & ((1u << shift) - 1u);
      uint32_t halfway = 1u << (shift - 1);
      if (rem > halfway || (rem == halfway && (q & 1u))) ++q;
      return static_cast<uint16_t>(sign | q);
    }
    uint32_t mant_odd = (absu >> 13) & 1u;
    absu += 0xfffu + mant_odd;  // round to nearest even at bit 13
    uint32_t h = ((absu - 0x38000000u) >> 13);
    return static_cast<uint16_t>(sign | h);
  }
  static SMELT_HD float to_float(uint16_t h) {
#if SMELT_HALF_CVT_HW
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    const uint32_t nan = (static_cast<uint32_t>(h & 0x8000u) << 16) | 0x7f800000u |
                         (static_cast<uint32_t>(h & 0x3ffu) << 13);
    return (h & 0x7fffu) > 0x7c00u ? half_detail::bits_float(nan) : f;
#else
    return to_float_portable(h);
#endif
  }
  static SMELT_HD float to_float_portable(uint16_t h) {
    uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t mant = h & 0x3ffu;
    uint32_t u;
    if (exp == 0x1f) {
      u = sign | 0x7f800000u | (mant << 13);
    } else if (exp == 0) {
      if (mant == 0) {
        u = sign;
      } else {  // subnormal: normalize
        int e = -1;
        do {
          ++e;
          mant <<= 1;
        } while ((mant & 0x400u) == 0);
        u = sign | (static_cast<uint32_t>(112 - e) << 23) | ((mant & 0x3ffu) << 13);
      }
    } else {
      u = sign | ((exp + 112u) << 23) | (mant << 13);
    }
    return half_detail::bits_float(u);
  }
};

/// bfloat16: the top 16 bits of a float32 (8 exponent, 7 mantissa bits).
struct BFloat16 {
  uint16_t x = 0;
  BFloat16() = default;
  SMELT_HD BFloat16(float f) : x(from_float(f)) {}
  SMELT_HD operator float() const {
    return half_detail::bits_float(static_cast<uint32_t>(x) << 16);
  }
  static SMELT_HD BFloat16 from_bits(uint16_t b) {
    BFloat16 h;
    h.x = b;
    return h;
  }
  static SMELT_HD uint16_t from_float(float f) {
    uint32_t u = half_detail::float_bits(f);
#if SMELT_HALF_CVT_HW
    uint16_t h;
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f));
    return (u & 0x7fffffffu) > 0x7f800000u ? static_cast<uint16_t>((u >> 16) | 0x40u) : h;
#else
    if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);  // NaN
    u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest even
    return static_cast<uint16_t>(u >> 16);
#endif
  }
};

}  // namespace smelt
