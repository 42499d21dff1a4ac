// CPU reference for dropout, drop-path, column copies and batched transposes.
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "kernels/common/dispatch.h"
#include "kernels/common/dropout_math.h"
#include "kernels/common/half.h"
#include "kernels/regularize.h"

namespace cnn::kernels::cpu {

void dropout(DType dt, const void* x, void* y, int64_t n, double p, MaskSeed mask_seed, uint64_t offset, Stream) {
  const uint64_t seed = mask_seed.resolve();
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

void drop_path(DType dt, const void* x, void* y, int64_t rows, int64_t row_size, double p, MaskSeed mask_seed,
               uint64_t offset, Stream) {
  const uint64_t seed = mask_seed.resolve();
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

namespace {
// y[b, c, r] = x[b, r, c] in square tiles, so that both the reads and the writes of a tile stay in a
// few cache lines; E is an unsigned integer of the element's size (the bits are only moved).
template <class E>
void transpose_tiles(const E* x, E* y, int64_t batch, int64_t rows, int64_t cols) {
  constexpr int64_t kTile = 32;
  const int64_t row_tiles = (rows + kTile - 1) / kTile, col_tiles = (cols + kTile - 1) / kTile;
#pragma omp parallel for collapse(3) schedule(static) if (batch * rows * cols > 65536)
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t rt = 0; rt < row_tiles; ++rt)
      for (int64_t ct = 0; ct < col_tiles; ++ct) {
        const E* src = x + b * rows * cols;
        E* dst = y + b * rows * cols;
        const int64_t row_end = std::min(rows, (rt + 1) * kTile), col_end = std::min(cols, (ct + 1) * kTile);
        for (int64_t r = rt * kTile; r < row_end; ++r)
          for (int64_t c = ct * kTile; c < col_end; ++c) dst[c * rows + r] = src[r * cols + c];
      }
}
}  // namespace

void transpose_batched(DType dt, const void* x, void* y, int64_t batch, int64_t rows, int64_t cols, Stream) {
  switch (dtype_size(dt)) {
    case 1: return transpose_tiles(static_cast<const uint8_t*>(x), static_cast<uint8_t*>(y), batch, rows, cols);
    case 2: return transpose_tiles(static_cast<const uint16_t*>(x), static_cast<uint16_t*>(y), batch, rows, cols);
    case 4: return transpose_tiles(static_cast<const uint32_t*>(x), static_cast<uint32_t*>(y), batch, rows, cols);
    case 8: return transpose_tiles(static_cast<const uint64_t*>(x), static_cast<uint64_t*>(y), batch, rows, cols);
  }
  CNN_FAIL("transpose_batched: no ", dtype_size(dt), "-byte elements");
}

}  // namespace cnn::kernels::cpu
