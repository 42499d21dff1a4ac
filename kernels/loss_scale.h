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
// memory. With a control block (kernels/optimizer.h), inv_scale is ignored and the pass divides by
// the block's loss scale instead, read on the device.
//
// step_control then turns those results into the step's verdict on the device, the dynamic loss
// scaler of torch.cuda.amp.GradScaler and clip_grad_norm_'s coefficient in one thread: finite
// gradients: apply, multiplier min(1, max_norm / (norm + 1e-6)) (1 without clipping), the scale
// times growth_factor after growth_interval clean steps in a row; inf/nan: skip, count it, the scale
// times backoff_factor. The optimizer kernels read the verdict, so the host never waits for it.
#pragma once
#include <cmath>
#include <cstdint>

#include "kernels/common/dtype.h"
#include "kernels/optimizer.h"

namespace cnn::kernels {

constexpr int kLossScaleMaxBlocks = 1024;

struct StepControlArgs {
  double max_norm = 0;       // clip_grad_norm (<= 0: no clipping)
  bool adapt_scale = false;  // fp16's dynamic loss scale
  float growth_factor = 2.f, backoff_factor = 0.5f;
  int growth_interval = 2000;
};

#define CNN_LOSS_SCALE_KERNELS(...)                                                                  \
  void unscale_and_check(const MultiTensorSlot* slots, int count, int64_t total, DType grad_dtype,  \
                         float inv_scale, const float* control, float* partials, float* result __VA_ARGS__); \
  /* control (kStepControlFields floats) updated from result = {sum of squares, non-finite count} */ \
  void step_control(const float* result, const StepControlArgs& args, float* control __VA_ARGS__);

namespace cpu {
CNN_LOSS_SCALE_KERNELS(, Stream stream = nullptr)
}
namespace cuda {
CNN_LOSS_SCALE_KERNELS(, Stream stream)
}
#undef CNN_LOSS_SCALE_KERNELS

// The verdict of one step (see step_control above), shared by both backends.
CNN_HD void update_step_control(const StepControlArgs& a, const float* result, float* c) {
  const double norm = ::sqrt(static_cast<double>(result[0]));
  c[kStepControlNorm] = static_cast<float>(norm);
  if (result[1] != 0.f) {  // inf/nan gradients: skip the step
    c[kStepControlApply] = 0.f;
    c[kStepControlSkipped] += 1.f;
    c[kStepControlSkippedInARow] += 1.f;
    c[kStepControlGrowthTracker] = 0.f;
    if (a.adapt_scale) c[kStepControlScale] *= a.backoff_factor;
    return;
  }
  c[kStepControlApply] = 1.f;
  c[kStepControlSkippedInARow] = 0.f;
  const double clip = a.max_norm > 0 ? a.max_norm / (norm + 1e-6) : 1.0;
  c[kStepControlGradScale] = static_cast<float>(clip < 1.0 ? clip : 1.0);
  if (a.adapt_scale) {
    c[kStepControlGrowthTracker] += 1.f;
    if (c[kStepControlGrowthTracker] >= static_cast<float>(a.growth_interval)) {
      c[kStepControlScale] *= a.growth_factor;
      c[kStepControlGrowthTracker] = 0.f;
    }
  }
}

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
