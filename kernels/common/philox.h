// Philox4x32-10, the counter-based generator of Salmon et al. (SC'11): a pure function of a
// 64-bit key and a 128-bit counter, so any element of a random tensor can be computed
// independently, on host or device, and the same (seed, counter) gives the same bits everywhere.
#pragma once
#include <cmath>
#include <cstdint>

#include "kernels/common/host_device.h"

namespace cnn {

struct Philox4 {
  uint32_t v[4];
};

CNN_HD Philox4 philox4x32_10(uint64_t key, uint64_t counter_lo, uint64_t counter_hi) {
  uint32_t c0 = static_cast<uint32_t>(counter_lo), c1 = static_cast<uint32_t>(counter_lo >> 32);
  uint32_t c2 = static_cast<uint32_t>(counter_hi), c3 = static_cast<uint32_t>(counter_hi >> 32);
  uint32_t k0 = static_cast<uint32_t>(key), k1 = static_cast<uint32_t>(key >> 32);
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = static_cast<uint64_t>(0xD2511F53u) * c0;
    const uint64_t p1 = static_cast<uint64_t>(0xCD9E8D57u) * c2;
    const uint32_t hi0 = static_cast<uint32_t>(p0 >> 32), lo0 = static_cast<uint32_t>(p0);
    const uint32_t hi1 = static_cast<uint32_t>(p1 >> 32), lo1 = static_cast<uint32_t>(p1);
    c0 = hi1 ^ c1 ^ k0;
    c1 = lo1;
    c2 = hi0 ^ c3 ^ k1;
    c3 = lo0;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return Philox4{{c0, c1, c2, c3}};
}

// Uniform in (0, 1]: never 0, so that log() in Box-Muller is finite.
CNN_HD double philox_unit(uint32_t hi, uint32_t lo) {
  const uint64_t bits53 = ((static_cast<uint64_t>(hi) << 32) | lo) >> 11;
  return (static_cast<double>(bits53) + 1.0) * (1.0 / 9007199254740992.0);
}

enum class RandomKind : uint8_t { uniform, normal };

// Element `index` of a random tensor drawn with `seed` from `stream` (a second key word, so that
// different uses of one seed draw independent numbers). Uniform: [a, b). Normal: mean a, std b.
CNN_HD double philox_element(RandomKind kind, uint64_t seed, uint64_t stream, uint64_t index, double a, double b) {
  const Philox4 r = philox4x32_10(seed, index, stream);
  const double u1 = philox_unit(r.v[0], r.v[1]);
  if (kind == RandomKind::uniform) return a + (b - a) * (1.0 - u1);
  const double u2 = philox_unit(r.v[2], r.v[3]);
  const double radius = std::sqrt(-2.0 * std::log(u1));
#if defined(__CUDA_ARCH__)
  // cospi needs no large-argument reduction, whose local-memory slow path cos() would compile in.
  const double c = cospi(2.0 * u2);
#else
  const double c = std::cos(6.283185307179586 * u2);
#endif
  return a + b * radius * c;
}

// SplitMix64's finaliser: a 64-bit mix in which every input bit changes every output bit.
CNN_HD uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Derives the seed of draw number `index` from a seed (a SplitMix64 mix of both), so that two
// models built with one seed are identical and different indices are independent. On the host
// and in kernels alike: a kernel can derive a module's mask seed from a step seed on the device.
CNN_HD uint64_t derive_seed(uint64_t seed, uint64_t index) { return splitmix64(splitmix64(seed) ^ index); }

}  // namespace cnn
