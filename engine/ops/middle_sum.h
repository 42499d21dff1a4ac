// The middle-axis sum shared by the ops that reduce (sum/mean, the gradient of a broadcast operand,
// the mean of the cross-entropy row losses): reduce_middle_sum with the workspace its CUDA kernel
// needs when it reduces in two stages.
#pragma once
#include <cstdint>

#include "engine/tensor.h"

namespace cnn {

// out[o, i] = scale * sum_m in[o, m, i] over `in` viewed as [outer, mid, inner], on in's device.
// Defined in engine/ops/reduce.cpp.
void middle_sum(const Tensor& in, Tensor& out, int64_t outer, int64_t mid, int64_t inner, double scale);

}  // namespace cnn
