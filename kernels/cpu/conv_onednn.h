// f32 and bf16 NHWC convolutions through oneDNN (kernels/cpu/conv_onednn.cpp), built when CMake
// finds oneDNN (CNN_WITH_ONEDNN). Same arguments and results as kernels/cpu/conv.cpp's passes; and
// inference's forward with an eval-mode BatchNorm folded in.
#pragma once
#include <string>

#include "kernels/common/dtype.h"
#include "kernels/conv.h"

namespace cnn::kernels::cpu {

// Runs one pass in the order of ConvBuffers (forward: x, w -> y; backward_data: dy, w -> dx;
// backward_filter: x, dy -> dw), overwriting `out`, and returns true; or returns false and touches
// nothing when oneDNN declines: a dtype other than f32 and bf16, or a geometry for which it has only its
// reference implementation. A failure while running throws.
bool onednn_conv2d(ConvDirection direction, DType dt, const ConvGeometry& g, const void* first, const void* second,
                   void* out);

// The implementation oneDNN runs for that pass (for example "brg:avx512_core"), or "" when declined.
std::string onednn_conv2d_implementation(ConvDirection direction, DType dt, const ConvGeometry& g);

// Backward-data that adds into dx instead of overwriting it: dx += conv_backward_data(dy, w), the
// sum taken in the primitive's f32 accumulators and dx rounded once. Where a tensor feeds two ops
// (a residual block's input) the second gradient then needs no separate add. Taken for stride-1,
// undilated, ungrouped convolutions with a spatial kernel (as the forward of the flipped, transposed
// weights, with oneDNN's sum post-op) and unstrided bf16 1x1 ones (a matrix product with the same
// post-op); returns false and touches nothing otherwise.
bool onednn_conv2d_backward_data_accumulate(DType dt, const ConvGeometry& g, const void* dy, const void* w, void* dx);
// Its implementation, or "" when declined.
std::string onednn_conv2d_backward_data_accumulate_implementation(DType dt, const ConvGeometry& g);

// An eval-mode BatchNorm after the convolution, and what follows it: y = act(conv * scale + shift
// [+ residual]) per output channel, with scale = weight / sqrt(running_var + eps) and shift = bias -
// running_mean * scale (+ the convolution's bias * scale), both f32 [O]; residual (nullable) in the
// activations' dtype and y's shape.
struct FoldedBatchNorm {
  const float* scale = nullptr;
  const float* shift = nullptr;
  const void* residual = nullptr;
  bool relu = false;
};

// The forward convolution of inference (x and w in dt) with that BatchNorm folded in: the scale
// into the weights as they are reordered, the shift as the bias, the residual and the ReLU as
// post-ops; y written once. Returns false and touches nothing where oneDNN declines
// (dt other than f32 and bf16, groups, a geometry with only reference loops).
bool onednn_conv2d_folded(DType dt, const ConvGeometry& g, const void* x, const void* w, const FoldedBatchNorm& bn,
                          void* y);
// Its implementation, or "" when declined.
std::string onednn_conv2d_folded_implementation(DType dt, const ConvGeometry& g, bool residual, bool relu);

}  // namespace cnn::kernels::cpu
