// The output size of a sliding window (convolution or pooling) along one axis, written once for the
// ops, the shape pass of the layers and the benchmarks.
#pragma once
#include <cstdint>

#include "kernels/common/host_device.h"

namespace cnn {

// a / b rounded towards minus infinity, for b > 0.
CNN_HD int64_t floor_div(int64_t a, int64_t b) {
  const int64_t q = a / b;
  return q * b > a ? q - 1 : q;
}

// PyTorch's size (its pooling_output_shape; convolutions are the case without ceil_mode):
//   floor((input + 2 pad - dilation (kernel - 1) - 1 [+ stride - 1 with ceil_mode]) / stride) + 1,
// and with ceil_mode the last window must start inside the input or its left padding. Zero or
// negative when the input is smaller than the dilated window: callers refuse that.
CNN_HD int64_t window_output_size(int64_t input, int64_t kernel, int64_t stride, int64_t pad, int64_t dilation,
                                  bool ceil_mode) {
  const int64_t span = input + 2 * pad - dilation * (kernel - 1) - 1;
  int64_t out = floor_div(span + (ceil_mode ? stride - 1 : 0), stride) + 1;
  if (ceil_mode && (out - 1) * stride >= input + pad) --out;
  return out;
}

}  // namespace cnn
