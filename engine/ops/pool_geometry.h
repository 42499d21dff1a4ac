// The window geometry of a pooling op over an [N, H, W, C] input, checked (shared by the pooling ops
// and the BatchNorm + ReLU + max-pool op).
#pragma once
#include <string>

#include "engine/ops.h"
#include "kernels/pool.h"

namespace cnn::op_geometry {

// n, h, w, c of x, refusing anything but a floating [N, H, W, C] tensor.
kernels::PoolGeometry pool_input(const char* op, const Tensor& x);

// The windows of `options` over x, with PyTorch's output size (ceil_mode, padding at most half the
// kernel); refuses windows larger than the padded input.
kernels::PoolGeometry pool_windows(const char* op, const Tensor& x, const Pool2dOptions& options);

// The same over an input of n, h, w, c as in `input` (described as `input_description` in errors),
// for an input that a fused op never stores.
kernels::PoolGeometry pool_windows_over(const char* op, kernels::PoolGeometry input,
                                        const std::string& input_description, const Pool2dOptions& options);

}  // namespace cnn::op_geometry
