// CPU reference for the reductions: sums accumulate in double for f64 and float otherwise,
// sequentially along mid, so that the result does not depend on the thread count.
#include "kernels/reduce.h"

#include <algorithm>

#include "kernels/common/dispatch.h"
#include "kernels/common/half.h"
#include "kernels/common/max_math.h"

namespace cnn::kernels::cpu {

void reduce_middle_sum(DType dt, const void* x, void* y, int64_t outer, int64_t mid, int64_t inner, double scale,
                       void* /*workspace*/, Stream) {
  dispatch_floating(dt, "reduce_middle_sum", [&](auto tag) {
    using T = decltype(tag);
    using C = compute_t<T>;
    const T* xs = static_cast<const T*>(x);
    T* ys = static_cast<T*>(y);
    // Tiles of kTile neighbouring columns, so that each row's cache line is read once and not once
    // per column; each column is still summed in order along mid.
    constexpr int64_t kTile = 16;
    const int64_t tiles = (inner + kTile - 1) / kTile;
#pragma omp parallel for collapse(2) schedule(static) if (outer * inner * mid > 65536)
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t t = 0; t < tiles; ++t) {
        const int64_t first = t * kTile, width = std::min(kTile, inner - first);
        C acc[kTile] = {};
        for (int64_t m = 0; m < mid; ++m) {
          const T* row = xs + (o * mid + m) * inner + first;
          for (int64_t j = 0; j < width; ++j) acc[j] += to_compute(row[j]);
        }
        for (int64_t j = 0; j < width; ++j) ys[o * inner + first + j] = from_compute<T>(acc[j] * C(scale));
      }
    }
  });
}

void expand_middle(DType dt, const void* x, void* y, int64_t outer, int64_t mid, int64_t inner, double scale, Stream) {
  dispatch_floating(dt, "expand_middle", [&](auto tag) {
    using T = decltype(tag);
    using C = compute_t<T>;
    const T* xs = static_cast<const T*>(x);
    T* ys = static_cast<T*>(y);
#pragma omp parallel for collapse(2) schedule(static) if (outer * inner * mid > 65536)
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t m = 0; m < mid; ++m)
        for (int64_t i = 0; i < inner; ++i)
          ys[(o * mid + m) * inner + i] = from_compute<T>(to_compute(xs[o * inner + i]) * C(scale));
  });
}

void max_last(DType dt, const void* x, void* values, int64_t* indices, int64_t rows, int64_t cols, Stream) {
  dispatch_floating(dt, "max_last", [&](auto tag) {
    using T = decltype(tag);
    const T* xs = static_cast<const T*>(x);
    T* vs = static_cast<T*>(values);
#pragma omp parallel for schedule(static) if (rows * cols > 65536)
    for (int64_t r = 0; r < rows; ++r) {
      int64_t best = 0;
      auto best_value = to_compute(xs[r * cols]);
      for (int64_t c = 1; c < cols; ++c) {
        const auto v = to_compute(xs[r * cols + c]);
        if (max_replaces(v, best_value)) {  // kernels/common/max_math.h: NaN wins, then the first maximum
          best_value = v;
          best = c;
        }
      }
      vs[r] = xs[r * cols + best];
      indices[r] = best;
    }
  });
}

void max_last_backward(DType dt, const void* gy, const int64_t* indices, void* gx, int64_t rows, int64_t cols, Stream) {
  dispatch_floating(dt, "max_last_backward", [&](auto tag) {
    using T = decltype(tag);
    const T* gys = static_cast<const T*>(gy);
    T* gxs = static_cast<T*>(gx);
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < cols; ++c) gxs[r * cols + c] = from_compute<T>(compute_t<T>(0));
      gxs[r * cols + indices[r]] = gys[r];
    }
  });
}

}  // namespace cnn::kernels::cpu
