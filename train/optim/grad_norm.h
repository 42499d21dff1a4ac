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
// (device, dtype) pair covers all of its tensors.
GradientStats unscale_and_measure(const std::vector<Tensor>& grads, double inv_scale = 1.0);

// min(1, max_norm / (norm + 1e-6)); 1 when max_norm <= 0 (clipping off).
double clip_coefficient(double norm, double max_norm);

}  // namespace cnn::train
