// Reduction CUDA kernels over the [outer, mid, inner] view of reduce.h.
// reduce_middle_sum, in one or two stages:
//   stage 1: grid (outer x ceil(inner / 32) tiles, S row splits). A block of 32 x 8 threads (32 x 2
//     under emulation) owns 32 adjacent inner positions of one outer index and 1/S of the mid rows;
//     its 8 rows of threads stride through them, so each warp reads 32 consecutive elements
//     (coalesced), and combine their sums in shared memory in a fixed order. With inner == 1 (a full
//     reduction of each outer row) the grid is (outer, S) and all 256 threads stride over the row.
//     S is chosen so that the grid fills the device (about 4 blocks per SM, the SM count read once
//     from the device; see row_splits in launch.cuh), e.g. a conv bias gradient sum(dy[N*H*W, O], 0)
//     with O = 64 runs on 2 x 264 blocks of an H200 instead of 2. With S == 1 the block writes y.
//   stage 2 (S > 1): each block wrote its sums to a workspace [outer, S, inner] in the accumulate
//     type; a grid-stride pass adds the S partials of each output in split order. No atomics: the
//     result is bit-reproducible for a given device (S depends on its SM count).
//   Traffic: reads the input once (sizeof(T) bytes per element); the workspace adds
//   2 x S x outer x inner x sizeof(accumulate) bytes, a few per mille of the input for the shapes that
//   split. Accumulates in float (double for f64), as the CPU kernel does.
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
// Rows each thread sums at least before a split is worth its partial result.
#ifdef CNN_CUDA_EMULATION
constexpr int64_t kMinRowsPerThread = 2;
#else
constexpr int64_t kMinRowsPerThread = 16;
#endif

// The launch of one reduce_middle_sum: its stage-1 grid and the row splits.
struct MiddleSumPlan {
  bool rows_kernel;  // inner == 1
  int64_t outputs, blocks_per_split, splits, rows_per_split;
  size_t workspace_elements() const { return splits > 1 ? static_cast<size_t>(outputs * splits) : 0; }
};

MiddleSumPlan plan_middle_sum(int64_t outer, int64_t mid, int64_t inner) {
  MiddleSumPlan p;
  p.rows_kernel = inner == 1;
  p.outputs = outer * inner;
  p.blocks_per_split = p.rows_kernel ? outer : outer * ((inner + kTileInner - 1) / kTileInner);
  const int64_t threads_per_row = p.rows_kernel ? kThreads : kTileMid;
  p.splits = row_splits(mid, p.blocks_per_split, threads_per_row * kMinRowsPerThread);
  p.rows_per_split = (mid + p.splits - 1) / p.splits;
  return p;
}

// The rows [begin, end) of split `split` of mid.
struct RowRange {
  int64_t begin, end;
};
__device__ inline RowRange split_rows(int64_t split, int64_t rows_per_split, int64_t mid) {
  const int64_t begin = split * rows_per_split;
  return {begin, begin + rows_per_split < mid ? begin + rows_per_split : mid};
}

// grid = (outer * ceil(inner / 32), splits); block = (32, 8). Writes y (one split) or
// partial[o, split, i] (several).
template <class T>
__global__ void reduce_tile_kernel(const T* x, T* y, compute_t<T>* partial, int64_t outer, int64_t mid, int64_t inner,
                                   int64_t rows_per_split, compute_t<T> scale) {
  using C = compute_t<T>;
  __shared__ C sums[kTileMid][kTileInner];
  const int64_t tiles = (inner + kTileInner - 1) / kTileInner;
  const int64_t o = blockIdx.x / tiles;
  const int64_t i = (blockIdx.x % tiles) * kTileInner + threadIdx.x;
  const RowRange rows = split_rows(blockIdx.y, rows_per_split, mid);
  C acc = 0;
  if (o < outer && i < inner) {
    const T* column = x + o * mid * inner + i;
    for (int64_t m = rows.begin + threadIdx.y; m < rows.end; m += kTileMid) acc += to_compute(column[m * inner]);
  }
  sums[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && o < outer && i < inner) {
    C total = 0;
    for (int r = 0; r < kTileMid; ++r) total += sums[r][threadIdx.x];
    if (partial) partial[(o * gridDim.y + blockIdx.y) * inner + i] = total;
    else y[o * inner + i] = from_compute<T>(total * scale);
  }
}

// grid = (outer (capped; loops), splits); block = 256; inner == 1. Writes y or partial[o, split].
template <class T>
__global__ void reduce_rows_kernel(const T* x, T* y, compute_t<T>* partial, int64_t outer, int64_t mid,
                                   int64_t rows_per_split, compute_t<T> scale) {
  using C = compute_t<T>;
  __shared__ C scratch[kThreads];
  const RowRange rows = split_rows(blockIdx.y, rows_per_split, mid);
  for (int64_t o = blockIdx.x; o < outer; o += gridDim.x) {
    C acc = 0;
    for (int64_t m = rows.begin + threadIdx.x; m < rows.end; m += kThreads) acc += to_compute(x[o * mid + m]);
    const C total = block_sum<kThreads>(acc, scratch);
    if (threadIdx.x == 0) {
      if (partial) partial[o * gridDim.y + blockIdx.y] = total;
      else y[o] = from_compute<T>(total * scale);
    }
  }
}

// Stage 2: y[o, i] = scale * sum over s of partial[o, s, i], in split order.
template <class T>
__global__ void finish_middle_sum_kernel(const compute_t<T>* partial, T* y, int64_t outer, int64_t splits,
                                         int64_t inner, compute_t<T> scale) {
  using C = compute_t<T>;
  const int64_t n = outer * inner;
  for (int64_t j = CNN_GLOBAL_INDEX; j < n; j += CNN_GRID_STRIDE) {
    const int64_t o = j / inner, i = j - o * inner;  // once per output, not per element read
    const C* p = partial + o * splits * inner + i;
    C total = 0;
    for (int64_t s = 0; s < splits; ++s) total += p[s * inner];
    y[j] = from_compute<T>(total * scale);
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

size_t reduce_middle_sum_workspace_bytes(DType dt, int64_t outer, int64_t mid, int64_t inner) {
  if (outer * inner == 0) return 0;
  return plan_middle_sum(outer, mid, inner).workspace_elements() * (dt == DType::f64 ? sizeof(double) : sizeof(float));
}

void reduce_middle_sum(DType dt, const void* x, void* y, int64_t outer, int64_t mid, int64_t inner, double scale,
                       void* workspace, Stream stream) {
  if (outer * inner == 0) return;
  dispatch_floating(dt, "reduce_middle_sum", [&](auto tag) {
    using T = decltype(tag);
    using C = compute_t<T>;
    const T* xs = static_cast<const T*>(x);
    T* ys = static_cast<T*>(y);
    const MiddleSumPlan plan = plan_middle_sum(outer, mid, inner);
    C* partial = plan.splits > 1 ? static_cast<C*>(workspace) : nullptr;
    CNN_CHECK(plan.splits == 1 || workspace, "reduce_middle_sum: [", outer, ", ", mid, ", ", inner,
              "] reduces in two stages and needs a workspace of cuda::reduce_middle_sum_workspace_bytes; got none");
    if (plan.rows_kernel) {
      const unsigned blocks = static_cast<unsigned>(outer < kMaxBlocks ? outer : kMaxBlocks);
      CNN_LAUNCH(reduce_rows_kernel<T>, dim3(blocks, static_cast<unsigned>(plan.splits)), kThreads, stream, xs, ys,
                 partial, outer, mid, plan.rows_per_split, C(scale));
    } else {
      CNN_CHECK(plan.blocks_per_split <= 2147483647, "reduce_middle_sum: [", outer, ", ", mid, ", ", inner, "] needs ",
                plan.blocks_per_split,
                " output tiles, more than one CUDA grid holds; reduce a smaller tensor or fewer axes at a time");
      CNN_LAUNCH(reduce_tile_kernel<T>, dim3(static_cast<unsigned>(plan.blocks_per_split), static_cast<unsigned>(plan.splits)),
                 dim3(kTileInner, kTileMid), stream, xs, ys, partial, outer, mid, inner, plan.rows_per_split, C(scale));
    }
    if (partial)
      CNN_LAUNCH(finish_middle_sum_kernel<T>, grid_for(outer * inner, kThreads), kThreads, stream,
                 static_cast<const C*>(partial), ys, outer, plan.splits, inner, C(scale));
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
