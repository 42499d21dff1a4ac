// The keep decision of dropout and drop-path, shared by the CPU and CUDA kernels.
#pragma once
#include <cstdint>

#include "kernels/common/host_device.h"
#include "kernels/common/philox.h"

namespace cnn {

// Element `index` is kept when its uniform draw from (seed, offset + index) is >= p.
CNN_HD bool dropout_keep(uint64_t seed, uint64_t offset, uint64_t index, double p) {
  const Philox4 r = philox4x32_10(seed, offset + index, 0xD50u);
  return philox_unit(r.v[0], r.v[1]) > p;  // (0, 1]: p = 0 keeps everything
}

}  // namespace cnn
