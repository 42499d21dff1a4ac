// Element rules of batch norm shared by the CPU and CUDA kernels.
#pragma once
#include "kernels/batch_norm.h"
#include "kernels/common/host_device.h"

namespace cnn {

// Output of the affine normalisation plus the fused activation.
template <class A>
CNN_HD A batch_norm_output(A x, A mean, A invstd, A weight, A bias, A residual, kernels::BatchNormAct act) {
  A y = (x - mean) * invstd * weight + bias;
  if (act == kernels::BatchNormAct::add_relu) y += residual;
  if (act != kernels::BatchNormAct::none && y < A(0)) y = A(0);
  return y;
}

// Gradient reaching the normalisation: dy, masked where the fused relu clamped (y == 0).
template <class A>
CNN_HD A batch_norm_masked_grad(A dy, A y, kernels::BatchNormAct act) {
  return act != kernels::BatchNormAct::none && !(y > A(0)) ? A(0) : dy;
}

template <class A>
CNN_HD A batch_norm_input_grad(A dz, A xhat, A invstd, A weight, A sum_dz, A sum_dz_xhat, A inv_m, bool training) {
  if (!training) return dz * weight * invstd;
  return weight * invstd * (dz - sum_dz * inv_m - xhat * sum_dz_xhat * inv_m);
}

}  // namespace cnn
