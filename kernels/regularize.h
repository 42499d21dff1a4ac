// Dropout and drop-path masks from Philox, and the layout copies of concatenation and transposition.
#pragma once
#include <cstdint>

#include "kernels/common/dropout_math.h"
#include "kernels/common/dtype.h"

namespace cnn::kernels {

using Stream = void*;

#define CNN_REGULARIZE_KERNELS(...)                                                                         \
  /* y[i] = x[i] * keep(i) / (1 - p), keep(i) = philox(seed, offset + i) > p; also the backward. */      \
  /* The seed is seed.resolve() (kernels/common/dropout_math.h): given, or derived on the device.  */      \
  void dropout(DType dt, const void* x, void* y, int64_t n, double p, MaskSeed seed, uint64_t offset __VA_ARGS__); \
  /* rows of `row_size` elements: y = x * keep(row) / (1 - p) with keep(row) from philox(seed, offset + row) */ \
  void drop_path(DType dt, const void* x, void* y, int64_t rows, int64_t row_size, double p, MaskSeed seed, \
                 uint64_t offset __VA_ARGS__);                                                               \
  /* dst[r, dst_offset + j] = src[r, src_offset + j] for r < rows, j < cols; ld = row lengths */           \
  void copy_columns(DType dt, const void* src, int64_t src_ld, int64_t src_offset, void* dst, int64_t dst_ld, \
                    int64_t dst_offset, int64_t rows, int64_t cols __VA_ARGS__);                    \
  /* y[b, c, r] = x[b, r, c] for b < batch, r < rows, c < cols */                                         \
  void transpose_batched(DType dt, const void* x, void* y, int64_t batch, int64_t rows, int64_t cols __VA_ARGS__);

namespace cpu {
CNN_REGULARIZE_KERNELS(, Stream stream = nullptr)
}
namespace cuda {
CNN_REGULARIZE_KERNELS(, Stream stream)
}
#undef CNN_REGULARIZE_KERNELS

}  // namespace cnn::kernels
