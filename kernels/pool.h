// Pooling kernels over NHWC. No backward uses atomics, so all are deterministic. The average-pool
// backward gathers on both backends (each input element sums the shares of the windows covering it).
// The max-pool backward gathers on CUDA (each input element sums the gradients of the covering
// windows whose argmax it is) and scatters on the CPU (each output adds its gradient at its argmax,
// one image per thread). Window arithmetic: kernels/common/pool_math.h; the maximum's NaN rule:
// kernels/common/max_math.h.
#pragma once
#include <cstdint>

#include "kernels/common/dtype.h"

namespace cnn::kernels {

using Stream = void*;

struct PoolGeometry {
  int64_t n = 0, h = 0, w = 0, c = 0, oh = 0, ow = 0;
  int kh = 1, kw = 1, stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0;
  bool count_include_pad = true;
  bool adaptive = false;  // bins of adaptive pooling instead of kernel/stride/pad
};

#define CNN_POOL_KERNELS(...)                                                                               \
  /* argmax[i] is the flat h*W+w position of the chosen input in its image, for the backward */             \
  void max_pool2d_forward(DType dt, const PoolGeometry& g, const void* x, void* y, int32_t* argmax __VA_ARGS__); \
  void max_pool2d_backward(DType dt, const PoolGeometry& g, const void* dy, const int32_t* argmax,           \
                           void* dx __VA_ARGS__);                                                            \
  void avg_pool2d_forward(DType dt, const PoolGeometry& g, const void* x, void* y __VA_ARGS__);              \
  void avg_pool2d_backward(DType dt, const PoolGeometry& g, const void* dy, void* dx __VA_ARGS__);

namespace cpu {
CNN_POOL_KERNELS(, Stream stream = nullptr)
}
namespace cuda {
CNN_POOL_KERNELS(, Stream stream)
}
#undef CNN_POOL_KERNELS

}  // namespace cnn::kernels
