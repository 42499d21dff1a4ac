// The checked geometry of a convolution over an [N, H, W, C] input (shared by conv2d and the
// conv + BatchNorm + ReLU + max-pool inference op).
#pragma once
#include "engine/ops.h"
#include "kernels/conv.h"

namespace cnn::op_geometry {

// conv2d(x, weight, bias, options)'s geometry, with PyTorch's output size; refuses mismatched
// ranks, channels, dtypes and devices, and an empty output.
kernels::ConvGeometry conv_windows(const Tensor& x, const Tensor& weight, const Tensor& bias,
                                   const Conv2dOptions& options);

}  // namespace cnn::op_geometry
