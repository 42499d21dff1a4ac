// f32 and bf16 NHWC convolutions through oneDNN (kernels/cpu/conv_onednn.cpp), built when CMake finds oneDNN
// (CNN_WITH_ONEDNN). Same arguments and results as kernels/cpu/conv.cpp's passes.
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

}  // namespace cnn::kernels::cpu
