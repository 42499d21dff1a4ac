// The forward of BatchNorm + ReLU + max pooling as one CPU kernel (the stages of VGG-like nets and
// of compact_cnn: conv, BatchNorm, ReLU, 2x2 max-pool; ResNet's stem). Run one after the other, the
// BatchNorm forward writes its output y and the max-pool reads it back; this kernel pools
// relu(BatchNorm(x)) as it computes it, and y is never stored. Same bits as batch_norm_forward
// (relu) then max_pool2d_forward, for every dtype (values pass through T where y would hold them).
//
// The backward stays two steps (engine/ops/batch_norm.cpp): max_pool2d_backward's gather into a
// full-size gradient, then batch_norm_backward_reduce/input. A gather fused into both BatchNorm
// passes did it twice, and measured no faster than writing the gradient once and reading it twice.
//
// x is [N, H, W, C] (g.h, g.w, g.c its geometry); mean, invstd, weight and bias are per-channel
// arrays in the accumulate dtype (weight/bias may be null: 1 and 0). y and argmax are the pooled
// output [N, OH, OW, C] and its argmax as max_pool2d_forward writes them.
//
// CUDA runs the two kernels one after the other; there is no fused CUDA kernel yet.
#pragma once
#include <cstdint>

#include "kernels/batch_norm.h"
#include "kernels/pool.h"

namespace cnn::kernels::cpu {

void batch_norm_relu_max_pool_forward(DType dt, const PoolGeometry& g, const void* x, const void* mean,
                                      const void* invstd, const void* weight, const void* bias, void* y,
                                      int32_t* argmax, Stream stream = nullptr);

}  // namespace cnn::kernels::cpu
