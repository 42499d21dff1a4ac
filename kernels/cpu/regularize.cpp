// CPU reference for dropout, drop-path, column copies and batched transposes.
#include <cstring>

#include "kernels/common/dispatch.h"
#include "kernels/common/dropout_math.h"
#include "kernels/common/half.h"
#include "kernels/regularize.h"

namespace cnn::kernels::cpu {

void dropout(DType dt, const void* x, void* y, int64_t n, double p, uint64_t seed, uint64_t offset, Stream) {
  dispatch_floating(dt, "dropout", [&](auto tag) {
    using T = decltype(tag);
    using C = compute_t<T>;
    const T* xs = static_cast<const T*>(x);
    T* ys = static_cast<T*>(y);
    const C scale = dropout_scale<C>(p);
#pragma omp parallel for schedule(static) if (n > 32768)
    for (int64_t i = 0; i < n; ++i) {
      const bool keep = dropout_keep(seed, offset, static_cast<uint64_t>(i), p);
      ys[i] = from_compute<T>(dropout_value(to_compute(xs[i]), keep, scale));
    }
  });
}

void drop_path(DType dt, const void* x, void* y, int64_t rows, int64_t row_size, double p, uint64_t seed,
               uint64_t offset, Stream) {
  dispatch_floating(dt, "drop_path", [&](auto tag) {
    using T = decltype(tag);
    using C = compute_t<T>;
    const T* xs = static_cast<const T*>(x);
    T* ys = static_cast<T*>(y);
    const C scale = dropout_scale<C>(p);
    for (int64_t r = 0; r < rows; ++r) {
      const bool keep = dropout_keep(seed, offset, static_cast<uint64_t>(r), p);
      for (int64_t j = 0; j < row_size; ++j)
        ys[r * row_size + j] = from_compute<T>(dropout_value(to_compute(xs[r * row_size + j]), keep, scale));
    }
  });
}

void copy_columns(DType dt, const void* src, int64_t src_ld, int64_t src_offset, void* dst, int64_t dst_ld,
                  int64_t dst_offset, int64_t rows, int64_t cols, Stream) {
  const int64_t bytes = dtype_size(dt);
  const char* s = static_cast<const char*>(src);
  char* d = static_cast<char*>(dst);
#pragma omp parallel for schedule(static) if (rows * cols > 65536)
  for (int64_t r = 0; r < rows; ++r)
    std::memcpy(d + (r * dst_ld + dst_offset) * bytes, s + (r * src_ld + src_offset) * bytes,
                static_cast<size_t>(cols * bytes));
}

void transpose_batched(DType dt, const void* x, void* y, int64_t batch, int64_t rows, int64_t cols, Stream) {
  const int64_t bytes = dtype_size(dt);
  const char* s = static_cast<const char*>(x);
  char* d = static_cast<char*>(y);
#pragma omp parallel for collapse(2) schedule(static) if (batch * rows * cols > 65536)
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c)
        std::memcpy(d + ((b * cols + c) * rows + r) * bytes, s + ((b * rows + r) * cols + c) * bytes, static_cast<size_t>(bytes));
}

}  // namespace cnn::kernels::cpu
