// The forward of BatchNorm + ReLU + max pooling as one CPU kernel (the stages of VGG-like nets and
// of compact_cnn: conv, BatchNorm, ReLU, 2x2 max-pool; ResNet's stem). Run one after the other, the
// BatchNorm forward writes its output y and the max-pool reads it back; this kernel pools
// relu(BatchNorm(x)) as it computes it, and y is never stored. Same bits as batch_norm_forward
// (relu) then max_pool2d_forward, for every dtype (values pass through T where y would hold them).
//
// The backward is the BatchNorm backward's two passes (the per-channel sums, then the input
// gradient) with the max-pool's backward inside each: every pixel's gradient is gathered from the
// pooled gradient and the argmax, as max_pool2d_backward would write it, into a row buffer that the
// BatchNorm row reads. The full-size gradient is never stored: each pass reads x, the pooled
// gradient and the argmax (x plus half its size, for 2x2 windows) where the separate kernels write
// the full-size gradient and read it twice. Same bits as max_pool2d_backward then
// batch_norm_backward_reduce/input (relu, mask from x), since the rows hold the same values and the
// sums take them in the same order. f32 and f64 only, like the mask from x.
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

// The per-channel sums of dz and dz * xhat (as batch_norm_backward_reduce) for the gradient dy of
// the pooled output [N, OH, OW, C] that argmax points back into x.
void batch_norm_relu_max_pool_backward_reduce(DType dt, const PoolGeometry& g, const void* dy, const int32_t* argmax,
                                              const void* x, const void* mean, const void* invstd, const void* weight,
                                              const void* bias, void* sum_dz, void* sum_dz_xhat,
                                              Stream stream = nullptr);

// dx (as batch_norm_backward_input) from the same pooled gradient and the sums.
void batch_norm_relu_max_pool_backward_input(DType dt, const PoolGeometry& g, const void* dy, const int32_t* argmax,
                                             const void* x, const void* mean, const void* invstd, const void* weight,
                                             const void* bias, const void* sum_dz, const void* sum_dz_xhat,
                                             bool training, void* dx, Stream stream = nullptr);

}  // namespace cnn::kernels::cpu
