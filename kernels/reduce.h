// Reduction kernels. The input is viewed as [outer, mid, inner] and reduced over mid, which expresses
// sum/mean over any run of adjacent axes and the reduction of a broadcast operand's gradient.
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/common/dtype.h"

namespace cnn::kernels {

using Stream = void*;

#define CNN_REDUCE_KERNELS(...)                                                                            \
  /* y[o, i] = scale * sum_m x[o, m, i], accumulated in float (double for f64); the CUDA kernel needs */   \
  /* a workspace of cuda::reduce_middle_sum_workspace_bytes (null when that is 0; the CPU ignores it) */   \
  void reduce_middle_sum(DType dt, const void* x, void* y, int64_t outer, int64_t mid, int64_t inner,      \
                         double scale, void* workspace __VA_ARGS__);                                       \
  /* y[o, m, i] = scale * x[o, i]: the backward of reduce_middle_sum */                                    \
  void expand_middle(DType dt, const void* x, void* y, int64_t outer, int64_t mid, int64_t inner,          \
                     double scale __VA_ARGS__);                                                            \
  /* Per row of [rows, cols]: the maximum and the first index where it occurs. */                          \
  void max_last(DType dt, const void* x, void* values, int64_t* indices, int64_t rows,                     \
                int64_t cols __VA_ARGS__);                                                                 \
  /* gx = 0 except gx[r, indices[r]] = gy[r] */                                                            \
  void max_last_backward(DType dt, const void* gy, const int64_t* indices, void* gx, int64_t rows,         \
                         int64_t cols __VA_ARGS__);

namespace cpu {
CNN_REDUCE_KERNELS(, Stream stream = nullptr)
}
namespace cuda {
// Bytes of the per-split partial sums of a two-stage reduce_middle_sum (0 when it runs in one).
size_t reduce_middle_sum_workspace_bytes(DType dt, int64_t outer, int64_t mid, int64_t inner);
CNN_REDUCE_KERNELS(, Stream stream)
}
#undef CNN_REDUCE_KERNELS

}  // namespace cnn::kernels
