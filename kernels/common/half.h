// Conversions between float and the 16-bit storage types, round-to-nearest-even.
//
// One helper for every backend: in CUDA device code (nvcc's device pass, __CUDA_ARCH__) the
// functions below are the hardware conversions of cuda_fp16.h / cuda_bf16.h (__float2half_rn,
// __half2float, __float2bfloat16_rn, __bfloat162float: one instruction each); on the host (the CPU
// backend, and the host emulation of the CUDA kernels) they are the integer code here, which
// rounds exactly as the hardware does: to nearest, ties to even, through the subnormals, and to
// infinity past the largest finite value. So CPU and CUDA produce the same bits for every number.
//
// NaN rule: a NaN converts to a NaN of the same sign. The host code keeps the payload and sets the
// quiet bit (half: the top 10 payload bits of the float; float from half: the 10 bits shifted up), so
// a quiet NaN survives float -> 16 bits -> float bit for bit and a signalling one comes back quiet.
// The device instructions may return the canonical NaN (0x7fff) instead: NaN payloads are not part
// of the CPU/CUDA agreement, NaN-ness is.
#pragma once
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/common/dtype.h"
#include "kernels/common/host_device.h"

#if defined(__CUDACC__)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#endif

namespace cnn {

CNN_HD uint32_t float_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}
CNN_HD float bits_float(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

CNN_HD uint16_t float_to_half_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __half_as_ushort(__float2half_rn(f));
#else
  const uint32_t x = float_bits(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t a = x & 0x7fffffffu;
  if (a >= 0x7f800000u) {  // inf or nan (nan stays quiet, keeps top payload bits)
    return static_cast<uint16_t>(sign | 0x7c00u | (a > 0x7f800000u ? (0x200u | ((a >> 13) & 0x3ffu)) : 0u));
  }
  if (a >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds past 65504: inf
  if (a < 0x38800000u) {  // below 2^-14: half subnormal or zero
    const uint32_t e = a >> 23;
    if (e < 102) return static_cast<uint16_t>(sign);  // below 2^-25 rounds to zero
    const uint32_t mant = (a & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126 - e;  // value in units of 2^-24 is mant >> shift
    uint32_t q = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1u);
    const uint32_t halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (q & 1u))) ++q;
    return static_cast<uint16_t>(sign | q);
  }
  const uint32_t r = a - 0x38000000u;  // rebias exponent from 127 to 15
  uint32_t q = r >> 13;
  const uint32_t rem = r & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (q & 1u))) ++q;  // a carry into the exponent is correct
  return static_cast<uint16_t>(sign | q);
#endif
}

CNN_HD float half_bits_to_float(uint16_t h) {
#if defined(__CUDA_ARCH__)
  return __half2float(__ushort_as_half(h));
#else
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t e = (h >> 10) & 0x1fu;
  const uint32_t m = h & 0x3ffu;
  if (e == 0) {
    const float v = static_cast<float>(m) * 5.9604644775390625e-8f;  // m * 2^-24, exact
    return sign ? -v : v;
  }
  if (e == 31) return bits_float(sign | 0x7f800000u | (m << 13));
  return bits_float(sign | ((e + 112u) << 23) | (m << 13));
#endif
}

CNN_HD uint16_t float_to_bf16_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __bfloat16_as_ushort(__float2bfloat16_rn(f));
#else
  // Both results computed and one selected, without a branch, so that loops over arrays of them
  // vectorize (a branch here left the BatchNorm backward's bf16 loop scalar, ten times slower).
  const uint32_t x = float_bits(f);
  const uint32_t quiet_nan = (x >> 16) | 0x40u;
  const uint32_t rounded = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
  return static_cast<uint16_t>((x & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded);
#endif
}

CNN_HD float bf16_bits_to_float(uint16_t b) {
#if defined(__CUDA_ARCH__)
  return __bfloat162float(__ushort_as_bfloat16(b));
#else
  return bits_float(static_cast<uint32_t>(b) << 16);
#endif
}

// Arithmetic type used for a storage type: double for double, float for everything else.
template <class T>
using compute_t = std::conditional_t<std::is_same_v<T, double>, double, float>;

template <class T>
CNN_HD compute_t<T> to_compute(T v) {
  if constexpr (std::is_same_v<T, half>) {
    return half_bits_to_float(v.bits);
  } else if constexpr (std::is_same_v<T, bfloat16>) {
    return bf16_bits_to_float(v.bits);
  } else {
    return static_cast<compute_t<T>>(v);
  }
}

template <class T, class C>
CNN_HD T from_compute(C v) {
  if constexpr (std::is_same_v<T, half>) {
    return half{float_to_half_bits(static_cast<float>(v))};
  } else if constexpr (std::is_same_v<T, bfloat16>) {
    return bfloat16{float_to_bf16_bits(static_cast<float>(v))};
  } else {
    return static_cast<T>(v);
  }
}

}  // namespace cnn
