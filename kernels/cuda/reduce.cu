// Reduction CUDA kernels over the [outer, mid, inner] view of reduce.h.
// reduce_middle_sum: a block of 32 x 8 threads (32 x 2 under emulation) owns 32 adjacent inner positions of one outer
//   index; the 8 rows of threads stride over mid, so each warp reads 32 consecutive elements
//   (coalesced), then the 8 partial sums are combined in shared memory. With inner == 1 (a full
//   reduction of each outer row) all 256 threads stride over mid instead. Reads the input once,
//   writes outer * inner elements. One block per output tile: a single huge row reduces in one
//   block, which is fine for losses and bias gradients but not a bandwidth-bound full reduction.
// expand_middle: grid-stride broadcast, reads outer * inner, writes the full tensor.
// max_last: one block per row, (value, index) pairs reduced in shared memory under the rule of
//   kernels/common/max_math.h (NaN wins; the lowest index among equals and among NaNs).
#include "kernels/common/dispatch.h"
#include "kernels/common/half.h"
#include "kernels/common/max_math.h"
#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/launch.cuh"
#include "kernels/reduce.h"

namespace cnn::kernels::cuda {

namespace {
constexpr int kThreads = kBlockThreads;
constexpr int kTileInner = 32;
constexpr int kTileMid = kThreads / kTileInner;

// grid.x = outer * ceil(inner / 32); block = (32, 8)
template <class T>
__global__ void reduce_tile_kernel(const T* x, T* y, int64_t outer, int64_t mid, int64_t inner, compute_t<T> scale) {
  using C = compute_t<T>;
  __shared__ C partial[kTileMid][kTileInner];
  const int64_t tiles = (inner + kTileInner - 1) / kTileInner;
  const int64_t o = blockIdx.x / tiles;
  const int64_t i = (blockIdx.x % tiles) * kTileInner + threadIdx.x;
  C acc = 0;
  if (o < outer && i < inner)
    for (int64_t m = threadIdx.y; m < mid; m += kTileMid) acc += to_compute(x[(o * mid + m) * inner + i]);
  partial[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0) {
    C total = 0;
    for (int r = 0; r < kTileMid; ++r) total += partial[r][threadIdx.x];
    if (o < outer && i < inner) y[o * inner + i] = from_compute<T>(total * scale);
  }
}

// grid.x = outer (capped; loops); block = 256; inner == 1
template <class T>
__global__ void reduce_rows_kernel(const T* x, T* y, int64_t outer, int64_t mid, compute_t<T> scale) {
  using C = compute_t<T>;
  __shared__ C scratch[kThreads];
  for (int64_t o = blockIdx.x; o < outer; o += gridDim.x) {
    C acc = 0;
    for (int64_t m = threadIdx.x; m < mid; m += kThreads) acc += to_compute(x[o * mid + m]);
    const C total = block_sum<kThreads>(acc, scratch);
    if (threadIdx.x == 0) y[o] = from_compute<T>(total * scale);
  }
}

template <class T>
__global__ void expand_middle_kernel(const T* x, T* y, int64_t outer, int64_t mid, int64_t inner,
                                     compute_t<T> scale) {
  const int64_t n = outer * mid * inner;
  for (int64_t j = CNN_GLOBAL_INDEX; j < n; j += CNN_GRID_STRIDE) {
    const int64_t o = j / (mid * inner), i = j % inner;
    y[j] = from_compute<T>(to_compute(x[o * inner + i]) * scale);
  }
}

template <class T>
__global__ void max_last_kernel(const T* x, T* values, int64_t* indices, int64_t rows, int64_t cols) {
  using C = compute_t<T>;
  __shared__ C best_value[kThreads];
  __shared__ int64_t best_index[kThreads];
  const unsigned t = threadIdx.x;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    C v = to_compute(x[r * cols]);
    int64_t idx = 0;
    for (int64_t c = t; c < cols; c += kThreads) {
      const C candidate = to_compute(x[r * cols + c]);
      if (max_pair_replaces(candidate, c, v, idx)) {
        v = candidate;
        idx = c;
      }
    }
    best_value[t] = v;
    best_index[t] = idx;
    __syncthreads();
    for (unsigned stride = kThreads / 2; stride > 0; stride >>= 1) {
      if (t < stride) {
        const C ov = best_value[t + stride];
        const int64_t oi = best_index[t + stride];
        if (max_pair_replaces(ov, oi, best_value[t], best_index[t])) {
          best_value[t] = ov;
          best_index[t] = oi;
        }
      }
      __syncthreads();
    }
    if (t == 0) {
      values[r] = x[r * cols + best_index[0]];
      indices[r] = best_index[0];
    }
    __syncthreads();
  }
}

template <class T>
__global__ void max_last_backward_kernel(const T* gy, const int64_t* indices, T* gx, int64_t rows, int64_t cols) {
  const int64_t n = rows * cols;
  for (int64_t j = CNN_GLOBAL_INDEX; j < n; j += CNN_GRID_STRIDE) {
    const int64_t r = j / cols, c = j % cols;
    gx[j] = c == indices[r] ? gy[r] : from_compute<T>(compute_t<T>(0));
  }
}
}  // namespace

void reduce_middle_sum(DType dt, const void* x, void* y, int64_t outer, int64_t mid, int64_t inner, double scale,
                       Stream stream) {
  if (outer * inner == 0) return;
  dispatch_floating(dt, "reduce_middle_sum", [&](auto tag) {
    using T = decltype(tag);
    using C = compute_t<T>;
    const T* xs = static_cast<const T*>(x);
    T* ys = static_cast<T*>(y);
    if (inner == 1) {
      const unsigned blocks = static_cast<unsigned>(outer < kMaxBlocks ? outer : kMaxBlocks);
      CNN_LAUNCH(reduce_rows_kernel<T>, blocks, kThreads, stream, xs, ys, outer, mid, C(scale));
    } else {
      const int64_t tiles = outer * ((inner + kTileInner - 1) / kTileInner);
      CNN_CHECK(tiles <= 2147483647, "reduce_middle_sum: [", outer, ", ", mid, ", ", inner, "] needs ", tiles,
                " output tiles, more than one CUDA grid holds; reduce a smaller tensor or fewer axes at a time");
      CNN_LAUNCH(reduce_tile_kernel<T>, static_cast<unsigned>(tiles), dim3(kTileInner, kTileMid), stream, xs, ys,
                 outer, mid, inner, C(scale));
    }
  });
}

void expand_middle(DType dt, const void* x, void* y, int64_t outer, int64_t mid, int64_t inner, double scale,
                   Stream stream) {
  const int64_t n = outer * mid * inner;
  if (n == 0) return;
  dispatch_floating(dt, "expand_middle", [&](auto tag) {
    using T = decltype(tag);
    CNN_LAUNCH(expand_middle_kernel<T>, grid_for(n, kThreads), kThreads, stream, static_cast<const T*>(x),
               static_cast<T*>(y), outer, mid, inner, compute_t<T>(scale));
  });
}

void max_last(DType dt, const void* x, void* values, int64_t* indices, int64_t rows, int64_t cols, Stream stream) {
  if (rows == 0) return;
  dispatch_floating(dt, "max_last", [&](auto tag) {
    using T = decltype(tag);
    const unsigned blocks = static_cast<unsigned>(rows < kMaxBlocks ? rows : kMaxBlocks);
    CNN_LAUNCH(max_last_kernel<T>, blocks, kThreads, stream, static_cast<const T*>(x), static_cast<T*>(values),
               indices, rows, cols);
  });
}

void max_last_backward(DType dt, const void* gy, const int64_t* indices, void* gx, int64_t rows, int64_t cols,
                       Stream stream) {
  if (rows * cols == 0) return;
  dispatch_floating(dt, "max_last_backward", [&](auto tag) {
    using T = decltype(tag);
    CNN_LAUNCH(max_last_backward_kernel<T>, grid_for(rows * cols, kThreads), kThreads, stream,
               static_cast<const T*>(gy), indices, static_cast<T*>(gx), rows, cols);
  });
}

}  // namespace cnn::kernels::cuda
