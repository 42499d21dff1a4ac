// Loss-scale kernels: one fused pass over all gradients of a group (the slot table of
// kernels/optimizer.h; only grad, numel and start are used) that multiplies each element by
// inv_scale (the pass only reads when inv_scale is 1) and measures the result: the sum of squares
// of the unscaled gradients (for clipping by global norm) and the number of inf/nan elements (a
// step with any is skipped by the dynamic loss scaler).
//
// Partial results go to `partials` (2 floats per block, at most kLossScaleMaxBlocks blocks; scratch
// owned by the caller), reduced in a fixed order into result[0] = sum of squares and
// result[1] = count of non-finite elements, so the outcome does not depend on timing. The CPU
// version ignores `partials` and writes `result` in host memory; the CUDA version writes device
// memory.
#pragma once
#include <cstdint>

#include "kernels/common/dtype.h"
#include "kernels/optimizer.h"

namespace cnn::kernels {

constexpr int kLossScaleMaxBlocks = 1024;

#define CNN_LOSS_SCALE_KERNELS(...)                                                                  \
  void unscale_and_check(const MultiTensorSlot* slots, int count, int64_t total, DType grad_dtype,  \
                         float inv_scale, float* partials, float* result __VA_ARGS__);

namespace cpu {
CNN_LOSS_SCALE_KERNELS(, Stream stream = nullptr)
}
namespace cuda {
CNN_LOSS_SCALE_KERNELS(, Stream stream)
}
#undef CNN_LOSS_SCALE_KERNELS

// The unscaled value of element i (also stored back when inv_scale != 1), shared by both backends.
CNN_HD float unscale_element(DType dt, void* grad, int64_t i, float inv_scale) {
  float g = load_grad(dt, grad, i);
  if (inv_scale != 1.f) {
    g *= inv_scale;
    if (dt == DType::f32)
      static_cast<float*>(grad)[i] = g;
    else
      store_copy(dt, grad, i, g);
  }
  return g;
}

}  // namespace cnn::kernels
