// Element rules of batch norm shared by the CPU and CUDA kernels.
#pragma once
#include <cmath>

#include "kernels/batch_norm.h"
#include "kernels/common/host_device.h"

namespace cnn {

// The normalised input.
template <class A>
CNN_HD A batch_norm_xhat(A x, A mean, A invstd) {
  return (x - mean) * invstd;
}

// The affine normalisation before the activation. The CPU backward recomputes it for the relu mask
// (kernels/batch_norm.h), so forward and backward must both take it from here.
template <class A>
CNN_HD A batch_norm_affine(A xhat, A weight, A bias) {
  return xhat * weight + bias;
}

// Output of the affine normalisation plus the fused activation.
template <class A>
CNN_HD A batch_norm_output(A x, A mean, A invstd, A weight, A bias, A residual, BatchNormActivation act) {
  A y = batch_norm_affine(batch_norm_xhat(x, mean, invstd), weight, bias);
  if (act == BatchNormActivation::add_relu) y += residual;
  if (act != BatchNormActivation::none && y < A(0)) y = A(0);
  return y;
}

// Gradient reaching the normalisation through the fused relu: dy where the output y is positive,
// zero where the relu clamped (y == 0).
template <class A>
CNN_HD A batch_norm_relu_grad(A dy, A y) {
  return y > A(0) ? dy : A(0);
}

// The same for any fused activation: dy unchanged without one.
template <class A>
CNN_HD A batch_norm_masked_grad(A dy, A y, BatchNormActivation act) {
  return act != BatchNormActivation::none ? batch_norm_relu_grad(dy, y) : dy;
}

template <class A>
CNN_HD A batch_norm_input_grad(A dz, A xhat, A invstd, A weight, A sum_dz, A sum_dz_xhat, A inv_m, bool training) {
  if (!training) return dz * weight * invstd;
  return weight * invstd * (dz - sum_dz * inv_m - xhat * sum_dz_xhat * inv_m);
}

// 1 / sqrt(var + eps), in the statistics type (sqrt is correctly rounded on both backends).
template <class A>
CNN_HD A batch_norm_invstd(A var, A eps) {
  return A(1) / std::sqrt(var + eps);
}

// PyTorch's running statistics after one training batch of `count` values per channel:
// running = (1 - momentum) running + momentum batch, with the batch's variance unbiased
// (var * count / (count - 1)). In double, so both backends round once, the same way.
template <class A>
CNN_HD void batch_norm_running_update(A& running_mean, A& running_var, A mean, A var, double count, double momentum) {
  const double unbiased = static_cast<double>(var) * (count / (count - 1.0));
  running_mean = static_cast<A>((1.0 - momentum) * static_cast<double>(running_mean) + momentum * static_cast<double>(mean));
  running_var = static_cast<A>((1.0 - momentum) * static_cast<double>(running_var) + momentum * unbiased);
}

}  // namespace cnn
