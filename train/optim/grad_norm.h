// Gradient measurement for loss scaling and clipping: one fused pass over all gradients that
// unscales them (multiplies by 1 / loss scale) and returns their global L2 norm and the number of
// inf/nan elements; and the clipping coefficient of torch.nn.utils.clip_grad_norm_, which the
// optimizer then applies inside its update (as grad_scale) instead of in a pass of its own.
#pragma once
#include <cstdint>
#include <vector>

#include "engine/tensor.h"

namespace cnn::train {

struct GradientStats {
  double norm = 0;         // L2 norm of the finite (unscaled) gradient elements
  int64_t non_finite = 0;  // inf/nan elements
  bool finite() const { return non_finite == 0; }
};

// Gradients may be f32, f16 or bf16, on any devices (undefined tensors are skipped). A launch per
// (device, dtype) pair covers all of its tensors. Reads the results back (a synchronisation).
GradientStats unscale_and_measure(const std::vector<Tensor>& grads, double inv_scale = 1.0);

// The same pass for the training step, with nothing read back: the gradients (all on the device of
// `control`) are divided by the control block's loss scale (kernels/optimizer.h), and the result is
// {sum of squares, inf/nan count} as 2 f32 values on that device.
Tensor unscale_and_measure_on_device(const std::vector<Tensor>& grads, const Tensor& control);

// min(1, max_norm / (norm + 1e-6)); 1 when max_norm <= 0 (clipping off).
double clip_coefficient(double norm, double max_norm);

}  // namespace cnn::train
