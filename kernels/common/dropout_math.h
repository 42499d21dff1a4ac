// The keep decision and the element rule of dropout and drop-path, shared by the CPU and CUDA kernels.
#pragma once
#include <cstdint>

#include "kernels/common/host_device.h"
#include "kernels/common/philox.h"

namespace cnn {

// The seed of a mask: `seed` itself, or with `from` (a u64 in the kernel's memory, written before
// each step) derive_seed(*from, seed), resolved in the kernel: a replayed CUDA graph, whose kernel
// arguments were fixed at its capture, draws each step's masks that way.
struct MaskSeed {
  uint64_t seed = 0;
  const uint64_t* from = nullptr;
  CNN_HD MaskSeed(uint64_t s = 0, const uint64_t* f = nullptr) : seed(s), from(f) {}  // NOLINT: a plain seed converts
  CNN_HD uint64_t resolve() const { return from != nullptr ? derive_seed(*from, seed) : seed; }
};

// Element (or row) `index` is kept when its uniform draw in (0, 1] from (seed, offset + index) is
// greater than p: p = 0 keeps everything.
CNN_HD bool dropout_keep(uint64_t seed, uint64_t offset, uint64_t index, double p) {
  const Philox4 r = philox4x32_10(seed, offset + index, 0xD50u);
  return philox_unit(r.v[0], r.v[1]) > p;
}

// The factor 1 / (1 - p) of the kept elements.
template <class C>
CNN_HD C dropout_scale(double p) {
  return C(1) / C(1 - p);
}

// A kept element scaled by dropout_scale, a dropped one zero.
template <class C>
CNN_HD C dropout_value(C x, bool keep, C scale) {
  return keep ? x * scale : C(0);
}

}  // namespace cnn
