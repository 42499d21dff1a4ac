// CPU reference of the loss-scale pass: one loop per gradient tensor that unscales, sums squares
// (in double) and counts non-finite elements; the step's verdict from them.
#include "kernels/loss_scale.h"

#include <cmath>

namespace cnn::kernels::cpu {

void unscale_and_check(const MultiTensorSlot* slots, int count, int64_t /*total*/, DType grad_dtype, float inv_scale,
                       const float* control, float* /*partials*/, float* result, Stream) {
  if (control != nullptr) inv_scale = 1.f / control[kStepControlScale];
  double sum_squares = 0;
  int64_t non_finite = 0;
  for (int t = 0; t < count; ++t) {
    const MultiTensorSlot& s = slots[t];
#pragma omp parallel for schedule(static) reduction(+ : sum_squares, non_finite) if (s.numel > 32768)
    for (int64_t i = 0; i < s.numel; ++i) {
      const float g = unscale_element(grad_dtype, s.grad, i, inv_scale);
      if (std::isfinite(g))
        sum_squares += static_cast<double>(g) * g;
      else
        ++non_finite;
    }
  }
  result[0] = static_cast<float>(sum_squares);
  result[1] = static_cast<float>(non_finite);
}

void step_control(const float* result, const StepControlArgs& args, float* control, Stream) {
  update_step_control(args, result, control);
}

}  // namespace cnn::kernels::cpu
