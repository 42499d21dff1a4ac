// Inference of a network's first stage, conv2d -> BatchNorm (running statistics) -> ReLU -> max pool,
// as one CPU kernel for convolutions with few input channels (a grayscale or RGB image: compact_cnn's
// 1 -> 32, VGG-BN's 3 -> 64). Run as separate kernels, the convolution writes its full-size output
// (C_out / C_in times the input's size, 32x for compact_cnn) and the pooling reads it back, and a
// library convolution runs at a fraction of its speed on so few input channels. Here each pooling
// window's pixels are convolved directly into a per-thread row of C_out values (the output channels
// in vector registers, the taps inside the image only), normalised and clamped as
// batch_norm_forward does, and pooled by the max-pool loop of kernels/cpu/pool_loops.h: only the
// pooled output is stored.
//
// The values are batch_norm_forward's (relu) and max_pool2d_forward's applied to this kernel's
// convolution, whose sum runs over the taps in (kh, kw, c) order (products rounded, then added), then adds
// the convolution's bias: equal to the library's convolution up to rounding, not bit for bit.
//
// x is [N, H, W, C], weight [O, KH, KW, C] (groups 1, C at most kConvPoolMaxInputChannels), conv_bias
// [O] or null; mean, invstd, bn_weight and bn_bias are per-channel arrays in the accumulate dtype
// (bn_weight/bn_bias may be null: 1 and 0). `pool` is the pooling of the convolution's output
// (its n, h, w, c are the convolution's n, oh, ow, o) with windows that do not overlap. y is the
// pooled output [N, pool.oh, pool.ow, O]. f32 and f64.
#pragma once
#include <cstdint>

#include "kernels/conv.h"
#include "kernels/pool.h"

namespace cnn::kernels::cpu {

constexpr int64_t kConvPoolMaxInputChannels = 4;

void conv_batch_norm_relu_max_pool_forward(DType dt, const ConvGeometry& conv, const PoolGeometry& pool, const void* x,
                                           const void* weight, const void* conv_bias, const void* mean,
                                           const void* invstd, const void* bn_weight, const void* bn_bias, void* y,
                                           Stream stream = nullptr);

}  // namespace cnn::kernels::cpu
