// The keep decision and the element rule of dropout and drop-path, shared by the CPU and CUDA kernels.
#pragma once
#include <cstdint>

#include "kernels/common/host_device.h"
#include "kernels/common/philox.h"

namespace cnn {

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
