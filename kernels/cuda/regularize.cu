// Dropout, drop-path, column-copy and batched-transpose CUDA kernels: grid-stride elementwise passes
// (the transpose writes with a stride; it serves small tensors such as a flattened 7x7 feature map). Dropout masks are
// recomputed from Philox (seed, offset, index) with the same function as the CPU (no mask is stored).
// Traffic: one read and one write per element.
#include "kernels/common/dispatch.h"
#include "kernels/common/dropout_math.h"
#include "kernels/common/half.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/regularize.h"

namespace cnn::kernels::cuda {

namespace {
constexpr int kThreads = kBlockThreads;

template <class T>
__global__ void dropout_kernel(const T* x, T* y, int64_t n, double p, MaskSeed mask_seed, uint64_t offset, compute_t<T> scale) {
  const uint64_t seed = mask_seed.resolve();
  for (int64_t i = CNN_GLOBAL_INDEX; i < n; i += CNN_GRID_STRIDE) {
    const bool keep = dropout_keep(seed, offset, static_cast<uint64_t>(i), p);
    y[i] = from_compute<T>(dropout_value(to_compute(x[i]), keep, scale));
  }
}

template <class T>
__global__ void drop_path_kernel(const T* x, T* y, int64_t n, int64_t row_size, double p, MaskSeed mask_seed,
                                 uint64_t offset, compute_t<T> scale) {
  const uint64_t seed = mask_seed.resolve();
  for (int64_t i = CNN_GLOBAL_INDEX; i < n; i += CNN_GRID_STRIDE) {
    const bool keep = dropout_keep(seed, offset, static_cast<uint64_t>(i / row_size), p);
    y[i] = from_compute<T>(dropout_value(to_compute(x[i]), keep, scale));
  }
}

// Element copy by width: U is an unsigned integer type of the element's size.
template <class U>
__global__ void copy_columns_kernel(const U* src, int64_t src_ld, int64_t src_offset, U* dst, int64_t dst_ld,
                                    int64_t dst_offset, int64_t rows, int64_t cols) {
  const int64_t n = rows * cols;
  for (int64_t i = CNN_GLOBAL_INDEX; i < n; i += CNN_GRID_STRIDE) {
    const int64_t r = i / cols, j = i % cols;
    dst[r * dst_ld + dst_offset + j] = src[r * src_ld + src_offset + j];
  }
}
// y[b, c, r] = x[b, r, c], one output element per step.
template <class U>
__global__ void transpose_kernel(const U* x, U* y, int64_t batch, int64_t rows, int64_t cols) {
  const int64_t n = batch * rows * cols;
  for (int64_t i = CNN_GLOBAL_INDEX; i < n; i += CNN_GRID_STRIDE) {
    const int64_t c = i % cols, r = (i / cols) % rows, b = i / (rows * cols);
    y[(b * cols + c) * rows + r] = x[i];
  }
}

// Launches kernel<U> with U the unsigned integer type of the element size.
template <template <class> class Launch, class... Args>
void by_element_size(DType dt, Args... args) {
  switch (dtype_size(dt)) {
    case 1: Launch<uint8_t>::run(args...); return;
    case 2: Launch<uint16_t>::run(args...); return;
    case 4: Launch<uint32_t>::run(args...); return;
    default: Launch<uint64_t>::run(args...); return;
  }
}
}  // namespace

void dropout(DType dt, const void* x, void* y, int64_t n, double p, MaskSeed seed, uint64_t offset, Stream stream) {
  if (n == 0) return;
  dispatch_floating(dt, "dropout", [&](auto tag) {
    using T = decltype(tag);
    using C = compute_t<T>;
    CNN_LAUNCH(dropout_kernel<T>, grid_for(n, kThreads), kThreads, stream, static_cast<const T*>(x), static_cast<T*>(y),
               n, p, seed, offset, dropout_scale<C>(p));
  });
}

void drop_path(DType dt, const void* x, void* y, int64_t rows, int64_t row_size, double p, MaskSeed seed,
               uint64_t offset, Stream stream) {
  const int64_t n = rows * row_size;
  if (n == 0) return;
  dispatch_floating(dt, "drop_path", [&](auto tag) {
    using T = decltype(tag);
    using C = compute_t<T>;
    CNN_LAUNCH(drop_path_kernel<T>, grid_for(n, kThreads), kThreads, stream, static_cast<const T*>(x), static_cast<T*>(y),
               n, row_size, p, seed, offset, dropout_scale<C>(p));
  });
}

namespace {
template <class U>
struct CopyColumns {
  static void run(const void* src, int64_t src_ld, int64_t src_offset, void* dst, int64_t dst_ld, int64_t dst_offset,
                  int64_t rows, int64_t cols, Stream stream) {
    CNN_LAUNCH(copy_columns_kernel<U>, grid_for(rows * cols, kThreads), kThreads, stream, static_cast<const U*>(src),
               src_ld, src_offset, static_cast<U*>(dst), dst_ld, dst_offset, rows, cols);
  }
};
template <class U>
struct Transpose {
  static void run(const void* x, void* y, int64_t batch, int64_t rows, int64_t cols, Stream stream) {
    CNN_LAUNCH(transpose_kernel<U>, grid_for(batch * rows * cols, kThreads), kThreads, stream, static_cast<const U*>(x),
               static_cast<U*>(y), batch, rows, cols);
  }
};
}  // namespace

void copy_columns(DType dt, const void* src, int64_t src_ld, int64_t src_offset, void* dst, int64_t dst_ld,
                  int64_t dst_offset, int64_t rows, int64_t cols, Stream stream) {
  if (rows * cols == 0) return;
  by_element_size<CopyColumns>(dt, src, src_ld, src_offset, dst, dst_ld, dst_offset, rows, cols, stream);
}

void transpose_batched(DType dt, const void* x, void* y, int64_t batch, int64_t rows, int64_t cols, Stream stream) {
  if (batch * rows * cols == 0) return;
  by_element_size<Transpose>(dt, x, y, batch, rows, cols, stream);
}

}  // namespace cnn::kernels::cuda
