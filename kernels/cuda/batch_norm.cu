// Batch-norm CUDA kernels over x viewed as [M, C] (NHWC, M = N*H*W).
//
// Every kernel here uses one 2-D layout (ChannelLayout): a block of 256 threads is `lanes` threads
// across the channels by `rows` threads down the rows; each thread owns V adjacent channels and
// reads them with one 16-byte load per row (V = 8 halves/bfloat16s, 4 floats, 2 doubles) when C is
// a multiple of V and every pointer is 16-byte aligned, one element otherwise. lanes is the power of
// two <= 32 that covers C / V, so a row of threads reads whole contiguous lines (C = 64 in f16: 8
// lanes x 32 rows, each row of threads one 128-byte line). grid.x covers the channel tiles and
// grid.y the rows, so a thread's channels are fixed: the per-channel parameters are loaded once into
// registers and the inner loop has no division or modulo.
//
// Statistics (batch_norm_stats), one pass over x: each thread keeps a Welford (count, mean, M2) of
// its rows for each of its channels; the rows of threads merge theirs with Chan's formula in a tree
// in shared memory; each block writes its (mean, M2) to a workspace [2, S, C]; a second kernel merges
// the S splits per channel in split order, in double. The rows are split into S parts so that
// tiles x S blocks fill the device (about 4 blocks per SM; ResNet-50 at batch 256: C = 64 at 112x112
// gives 1 x 528 blocks of 6,080 rows, C = 2048 at 7x7 8 x 66 blocks of 190 rows on an H200).
// Traffic: reads x once (sizeof(T) bytes per element), writes 2 x S x C partials.
// Accuracy: no sum of squares anywhere, so no cancellation when |mean| >> std; a thread's Welford
// covers about M / (S x rows) values in float (double for f64) and everything above it is merged in
// double. Deterministic: fixed thread-to-row assignment, fixed merge order, no atomics.
//
// Backward reduction (batch_norm_backward_reduce): sum(dz) and sum(dz * xhat) in the same one pass
// and grid, reading dy, x (and y for the relu mask): 2-3 x sizeof(T) bytes per element; the tree in
// shared memory and the split-order sum in double as above.
//
// Running statistics (batch_norm_update_stats): one small kernel, one thread per channel: invstd and,
// in training, the momentum update of running_mean / running_var (unbiased) in double.
//
// Normalisation (batch_norm_forward) and the input gradient (batch_norm_backward_input) are
// elementwise passes in the same layout: forward reads x (and the residual) and writes y, 2-3 x
// sizeof(T) bytes per element; backward reads dy, x (and y) and writes dx (and dresidual), 3-5 x.
#include <initializer_list>
#include <type_traits>

#include "kernels/batch_norm.h"
#include "kernels/common/batch_norm_math.h"
#include "kernels/common/dispatch.h"
#include "kernels/common/half.h"
#include "kernels/common/welford.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/vector_access.cuh"

namespace cnn::kernels::cuda {

namespace {
constexpr int kThreads = kBlockThreads;
constexpr int kMaxLanes = 32;
// Rows each row of threads handles at least in a statistics split.
#ifdef CNN_CUDA_EMULATION
constexpr int64_t kMinRowsPerThread = 2;
#else
constexpr int64_t kMinRowsPerThread = 16;
#endif

// The grid of every kernel in this file, for a channel count and a vector width.
struct ChannelLayout {
  int lanes = 1, rows = kThreads;  // block = (lanes, rows)
  int64_t tiles = 1;               // grid.x
  dim3 block() const { return dim3(static_cast<unsigned>(lanes), static_cast<unsigned>(rows)); }
};

ChannelLayout channel_layout(int64_t c, int vector_width) {
  ChannelLayout l;
  const int64_t vectors = (c + vector_width - 1) / vector_width;
  while (l.lanes < kMaxLanes && l.lanes < vectors) l.lanes *= 2;
  l.rows = kThreads / l.lanes;
  l.tiles = (vectors + l.lanes - 1) / l.lanes;
  return l;
}

// The widest vector that C allows for T (the alignment of the pointers is checked per call).
template <class T>
int nominal_vector_width(int64_t c) {
  return c % kVectorWidth<T> == 0 ? kVectorWidth<T> : 1;
}

// Row splits of the reductions, from the layout with the nominal vector width (so the workspace
// size does not depend on the pointers; the scalar fallback just runs more blocks).
template <class T>
int64_t reduction_splits(int64_t m, int64_t c) {
  const ChannelLayout l = channel_layout(c, nominal_vector_width<T>(c));
  return row_splits(m, l.tiles, l.rows * kMinRowsPerThread);
}

// Blocks down the rows of an elementwise pass: one row of threads per row, grid-stride beyond that.
unsigned elementwise_row_blocks(int64_t m, const ChannelLayout& l) {
  int64_t blocks = (m + l.rows - 1) / l.rows;
  const int64_t most = kMaxBlocks < 65535 ? kMaxBlocks : 65535;  // grid.y holds at most 65535
  if (blocks > most) blocks = most;
  return static_cast<unsigned>(blocks < 1 ? 1 : blocks);
}

// The rows [begin, end) of split blockIdx.y.
struct RowRange {
  int64_t begin, end;
};
__device__ inline RowRange split_rows(int64_t rows_per_split, int64_t m) {
  const int64_t begin = static_cast<int64_t>(blockIdx.y) * rows_per_split;
  return {begin, begin + rows_per_split < m ? begin + rows_per_split : m};
}

// The first of this thread's V channels (>= c: the thread has none).
template <int V>
__device__ inline int64_t thread_channel() {
  return (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * V;
}

// V per-channel values from p[ch..ch+V), or `fallback` when p is null.
template <int V, class A>
__device__ inline void load_channels(const A* p, int64_t ch, A fallback, A (&out)[V]) {
#pragma unroll
  for (int k = 0; k < V; ++k) out[k] = p ? p[ch + k] : fallback;
}

// The end of both reductions' stage 1: every thread stores its V-channel results a and b in shared
// memory (any other per-thread state the combine needs is stored before the call), then a tree down
// the rows of threads (combine(into, from) folds thread `from`'s results into thread
// `into`'s, barriers between the levels), then the first row writes its V channels of the two
// per-thread arrays to the partials [blockIdx.y, c].
template <int V, class A, class Combine>
__device__ void combine_rows_and_write(const A (&a)[V], const A (&b)[V], A* shared_a, A* shared_b, Combine combine,
                                       int64_t ch, int64_t c, A* part_a, A* part_b) {
  const unsigned lanes = blockDim.x, t = threadIdx.y * lanes + threadIdx.x;
#pragma unroll
  for (int k = 0; k < V; ++k) {
    shared_a[t * V + k] = a[k];
    shared_b[t * V + k] = b[k];
  }
  __syncthreads();
  for (unsigned stride = blockDim.y / 2; stride > 0; stride >>= 1) {
    if (threadIdx.y < stride) combine(t, t + stride * lanes);
    __syncthreads();
  }
  if (threadIdx.y == 0 && ch < c) {
    const int64_t at = static_cast<int64_t>(blockIdx.y) * c + ch;
    for (int k = 0; k < V; ++k) {
      part_a[at + k] = shared_a[threadIdx.x * V + k];
      part_b[at + k] = shared_b[threadIdx.x * V + k];
    }
  }
}

// Stage 1 of the statistics: per block, Welford over its rows, merged down the rows of threads.
template <class T, int V>
__global__ void stats_partial_kernel(const T* x, int64_t m, int64_t c, int64_t rows_per_split, compute_t<T>* part_mean,
                                     compute_t<T>* part_m2) {
  using A = compute_t<T>;
  __shared__ A shared_count[kThreads];
  __shared__ A shared_mean[kThreads * V];
  __shared__ A shared_m2[kThreads * V];
  const unsigned lanes = blockDim.x, t = threadIdx.y * lanes + threadIdx.x;
  const int64_t ch = thread_channel<V>();
  const RowRange rows = split_rows(rows_per_split, m);
  A count = 0, mean[V], m2[V];
#pragma unroll
  for (int k = 0; k < V; ++k) mean[k] = m2[k] = A(0);
  if (ch < c) {
    for (int64_t r = rows.begin + threadIdx.y; r < rows.end; r += blockDim.y) {
      A v[V];
      load_vector<V>(x + r * c + ch, v);
      count += A(1);
      const A inv_count = A(1) / count;  // one division per row, shared by the V channels
#pragma unroll
      for (int k = 0; k < V; ++k) welford_add(mean[k], m2[k], v[k], inv_count);
    }
  }
  shared_count[t] = count;
  combine_rows_and_write<V>(
      mean, m2, shared_mean, shared_m2,
      [&](unsigned into, unsigned from) {
        const A count_a = shared_count[into], count_b = shared_count[from];
        for (int k = 0; k < V; ++k) {
          A merged_count = count_a;  // chan_merge advances it; every channel starts from the same count
          chan_merge(merged_count, shared_mean[into * V + k], shared_m2[into * V + k], count_b,
                     shared_mean[from * V + k], shared_m2[from * V + k]);
        }
        shared_count[into] = count_a + count_b;
      },
      ch, c, part_mean, part_m2);
}

// Stage 2: merge the splits of each channel in split order, in double.
template <class A>
__global__ void stats_finish_kernel(const A* part_mean, const A* part_m2, int64_t splits, int64_t rows_per_split,
                                    int64_t m, int64_t c, A* mean, A* var) {
  for (int64_t ch = CNN_GLOBAL_INDEX; ch < c; ch += CNN_GRID_STRIDE) {
    double count = 0, mu = 0, m2 = 0;
    for (int64_t s = 0; s < splits; ++s) {
      const int64_t begin = s * rows_per_split, end = begin + rows_per_split < m ? begin + rows_per_split : m;
      if (end <= begin) break;
      chan_merge(count, mu, m2, static_cast<double>(end - begin), static_cast<double>(part_mean[s * c + ch]),
                 static_cast<double>(part_m2[s * c + ch]));
    }
    mean[ch] = static_cast<A>(mu);
    var[ch] = static_cast<A>(m2 / static_cast<double>(m));
  }
}

// Stage 1 of the backward reduction: per block, sum(dz) and sum(dz * xhat) over its rows.
template <class T, int V>
__global__ void backward_partial_kernel(const T* dy, const T* y, const T* x, BatchNormActivation act,
                                        const compute_t<T>* mean, const compute_t<T>* invstd, int64_t m, int64_t c,
                                        int64_t rows_per_split, compute_t<T>* part_dz, compute_t<T>* part_dz_xhat) {
  using A = compute_t<T>;
  __shared__ A shared_dz[kThreads * V];
  __shared__ A shared_dz_xhat[kThreads * V];
  const int64_t ch = thread_channel<V>();
  const RowRange rows = split_rows(rows_per_split, m);
  A sum_dz[V], sum_dz_xhat[V];
#pragma unroll
  for (int k = 0; k < V; ++k) sum_dz[k] = sum_dz_xhat[k] = A(0);
  if (ch < c) {
    A mu[V], inv[V];
    load_channels<V>(mean, ch, A(0), mu);
    load_channels<V>(invstd, ch, A(1), inv);
    for (int64_t r = rows.begin + threadIdx.y; r < rows.end; r += blockDim.y) {
      A g[V], xv[V], yv[V];
      load_vector<V>(dy + r * c + ch, g);
      load_vector<V>(x + r * c + ch, xv);
      load_vector_or<V>(y ? y + r * c + ch : nullptr, A(1), yv);
#pragma unroll
      for (int k = 0; k < V; ++k) {
        const A dz = batch_norm_masked_grad<A>(g[k], yv[k], act);
        sum_dz[k] += dz;
        sum_dz_xhat[k] += dz * batch_norm_xhat<A>(xv[k], mu[k], inv[k]);
      }
    }
  }
  combine_rows_and_write<V>(
      sum_dz, sum_dz_xhat, shared_dz, shared_dz_xhat,
      [&](unsigned into, unsigned from) {
        for (int k = 0; k < V; ++k) {
          shared_dz[into * V + k] += shared_dz[from * V + k];
          shared_dz_xhat[into * V + k] += shared_dz_xhat[from * V + k];
        }
      },
      ch, c, part_dz, part_dz_xhat);
}

// Stage 2: out[c] = sum over splits of partial[s, c], in split order, in double; both sums.
template <class A>
__global__ void sums_finish_kernel(const A* part_a, const A* part_b, int64_t splits, int64_t c, A* out_a, A* out_b) {
  for (int64_t ch = CNN_GLOBAL_INDEX; ch < c; ch += CNN_GRID_STRIDE) {
    double a = 0, b = 0;
    for (int64_t s = 0; s < splits; ++s) {
      a += static_cast<double>(part_a[s * c + ch]);
      b += static_cast<double>(part_b[s * c + ch]);
    }
    out_a[ch] = static_cast<A>(a);
    out_b[ch] = static_cast<A>(b);
  }
}

template <class A>
__global__ void update_stats_kernel(const A* mean, const A* var, int64_t c, int64_t m, const A* count, double momentum,
                                    A eps, A* invstd, A* running_mean, A* running_var) {
  for (int64_t ch = CNN_GLOBAL_INDEX; ch < c; ch += CNN_GRID_STRIDE) {
    invstd[ch] = batch_norm_invstd<A>(var[ch], eps);
    if (running_mean)
      batch_norm_running_update<A>(running_mean[ch], running_var[ch], mean[ch], var[ch],
                                   count ? static_cast<double>(count[ch]) : static_cast<double>(m), momentum);
  }
}

template <class T, int V>
__global__ void forward_kernel(const T* x, int64_t m, int64_t c, const compute_t<T>* mean, const compute_t<T>* invstd,
                               const compute_t<T>* weight, const compute_t<T>* bias, const T* residual,
                               BatchNormActivation act, T* y) {
  using A = compute_t<T>;
  const int64_t ch = thread_channel<V>();
  if (ch >= c) return;
  A mu[V], inv[V], w[V], b[V];
  load_channels<V>(mean, ch, A(0), mu);
  load_channels<V>(invstd, ch, A(1), inv);
  load_channels<V>(weight, ch, A(1), w);
  load_channels<V>(bias, ch, A(0), b);
  const int64_t step = static_cast<int64_t>(gridDim.y) * blockDim.y;
  for (int64_t r = static_cast<int64_t>(blockIdx.y) * blockDim.y + threadIdx.y; r < m; r += step) {
    A xv[V], rv[V], out[V];
    load_vector<V>(x + r * c + ch, xv);
    load_vector_or<V>(residual ? residual + r * c + ch : nullptr, A(0), rv);
#pragma unroll
    for (int k = 0; k < V; ++k) out[k] = batch_norm_output<A>(xv[k], mu[k], inv[k], w[k], b[k], rv[k], act);
    store_vector<V>(y + r * c + ch, out);
  }
}

template <class T, int V>
__global__ void backward_input_kernel(const T* dy, const T* y, const T* x, int64_t m, int64_t c,
                                      const compute_t<T>* mean, const compute_t<T>* invstd, const compute_t<T>* weight,
                                      const compute_t<T>* sum_dz, const compute_t<T>* sum_dz_xhat, bool training,
                                      BatchNormActivation act, T* dx, T* dresidual) {
  using A = compute_t<T>;
  const int64_t ch = thread_channel<V>();
  if (ch >= c) return;
  const A inv_m = A(1) / static_cast<A>(m);
  A mu[V], inv[V], w[V], s1[V], s2[V];
  load_channels<V>(mean, ch, A(0), mu);
  load_channels<V>(invstd, ch, A(1), inv);
  load_channels<V>(weight, ch, A(1), w);
  load_channels<V>(sum_dz, ch, A(0), s1);
  load_channels<V>(sum_dz_xhat, ch, A(0), s2);
  const int64_t step = static_cast<int64_t>(gridDim.y) * blockDim.y;
  for (int64_t r = static_cast<int64_t>(blockIdx.y) * blockDim.y + threadIdx.y; r < m; r += step) {
    const int64_t at = r * c + ch;
    A g[V], xv[V], yv[V], dz[V], out[V];
    load_vector<V>(dy + at, g);
    load_vector<V>(x + at, xv);
    load_vector_or<V>(y ? y + at : nullptr, A(1), yv);
#pragma unroll
    for (int k = 0; k < V; ++k) {
      dz[k] = batch_norm_masked_grad<A>(g[k], yv[k], act);
      out[k] = batch_norm_input_grad<A>(dz[k], batch_norm_xhat<A>(xv[k], mu[k], inv[k]), inv[k], w[k], s1[k], s2[k],
                                        inv_m, training);
    }
    if (dresidual) store_vector<V>(dresidual + at, dz);
    if (dx) store_vector<V>(dx + at, out);
  }
}

// Runs body(std::integral_constant<int, V>) with the widest V that c and every pointer allow.
template <class T, class Body>
void with_vector_width(int64_t c, std::initializer_list<const void*> pointers, Body body) {
  bool aligned = nominal_vector_width<T>(c) > 1;
  for (const void* p : pointers) aligned = aligned && vector_aligned(p);
  if (aligned) body(std::integral_constant<int, kVectorWidth<T>>{});
  else body(std::integral_constant<int, 1>{});
}
}  // namespace

size_t batch_norm_workspace_bytes(DType dt, int64_t m, int64_t c) {
  size_t bytes = 0;
  dispatch_floating(dt, "batch_norm_workspace_bytes", [&](auto tag) {
    using T = decltype(tag);
    bytes = static_cast<size_t>(2 * reduction_splits<T>(m, c) * c) * sizeof(compute_t<T>);
  });
  return bytes;
}

namespace {
// The CUDA backward takes its relu mask from y alone (kernels/batch_norm.h says why).
void check_mask_source(BatchNormActivation act, const void* y, const char* kernel) {
  CNN_CHECK(act == BatchNormActivation::none || y != nullptr, kernel,
            ": a fused relu needs the forward's output y for its mask on CUDA");
}
}  // namespace

void batch_norm_stats(DType dt, const void* x, int64_t m, int64_t c, void* mean, void* var, void* workspace,
                      Stream stream) {
  if (c == 0) return;
  dispatch_floating(dt, "batch_norm_stats", [&](auto tag) {
    using T = decltype(tag);
    using A = compute_t<T>;
    const int64_t splits = reduction_splits<T>(m, c), rows_per_split = (m + splits - 1) / splits;
    A* part_mean = static_cast<A*>(workspace);
    A* part_m2 = part_mean + splits * c;
    with_vector_width<T>(c, {x}, [&](auto width) {
      constexpr int V = decltype(width)::value;
      const ChannelLayout l = channel_layout(c, V);
      const auto stats_partial = stats_partial_kernel<T, V>;
      CNN_LAUNCH(stats_partial, dim3(static_cast<unsigned>(l.tiles), static_cast<unsigned>(splits)),
                 l.block(), stream, static_cast<const T*>(x), m, c, rows_per_split, part_mean, part_m2);
    });
    CNN_LAUNCH(stats_finish_kernel<A>, grid_for(c, kThreads), kThreads, stream, static_cast<const A*>(part_mean),
               static_cast<const A*>(part_m2), splits, rows_per_split, m, c, static_cast<A*>(mean), static_cast<A*>(var));
  });
}

void batch_norm_update_stats(DType acc, const void* mean, const void* var, int64_t c, int64_t m, const void* count,
                             double momentum, double eps, void* invstd, void* running_mean, void* running_var,
                             Stream stream) {
  if (c == 0) return;
  CNN_CHECK(acc == DType::f32 || acc == DType::f64, "batch_norm_update_stats: statistics are f32 or f64, got ",
            dtype_name(acc));
  auto launch = [&](auto tag) {
    using A = decltype(tag);
    CNN_LAUNCH(update_stats_kernel<A>, grid_for(c, kThreads), kThreads, stream, static_cast<const A*>(mean),
               static_cast<const A*>(var), c, m, static_cast<const A*>(count), momentum, static_cast<A>(eps),
               static_cast<A*>(invstd), static_cast<A*>(running_mean), static_cast<A*>(running_var));
  };
  if (acc == DType::f64) launch(double{});
  else launch(float{});
}

void batch_norm_forward(DType dt, const void* x, int64_t m, int64_t c, const void* mean, const void* invstd,
                        const void* weight, const void* bias, const void* residual, BatchNormActivation act, void* y, void*,
                        Stream stream) {
  if (m * c == 0) return;
  dispatch_floating(dt, "batch_norm_forward", [&](auto tag) {
    using T = decltype(tag);
    using A = compute_t<T>;
    with_vector_width<T>(c, {x, residual, y}, [&](auto width) {
      constexpr int V = decltype(width)::value;
      const ChannelLayout l = channel_layout(c, V);
      const auto normalise = forward_kernel<T, V>;
      CNN_LAUNCH(normalise, dim3(static_cast<unsigned>(l.tiles), elementwise_row_blocks(m, l)), l.block(),
                 stream, static_cast<const T*>(x), m, c, static_cast<const A*>(mean), static_cast<const A*>(invstd),
                 static_cast<const A*>(weight), static_cast<const A*>(bias), static_cast<const T*>(residual), act,
                 static_cast<T*>(y));
    });
  });
}

void batch_norm_backward_reduce(DType dt, const void* dy, const void* y, const void* x, int64_t m, int64_t c,
                                const void* mean, const void* invstd, const void* /*weight*/, const void* /*bias*/,
                                BatchNormActivation act, void* sum_dz, void* sum_dz_xhat, void* workspace, Stream stream) {
  check_mask_source(act, y, "batch_norm_backward_reduce");
  if (c == 0) return;
  dispatch_floating(dt, "batch_norm_backward_reduce", [&](auto tag) {
    using T = decltype(tag);
    using A = compute_t<T>;
    const int64_t splits = reduction_splits<T>(m, c), rows_per_split = (m + splits - 1) / splits;
    A* part_dz = static_cast<A*>(workspace);
    A* part_dz_xhat = part_dz + splits * c;
    with_vector_width<T>(c, {dy, y, x}, [&](auto width) {
      constexpr int V = decltype(width)::value;
      const ChannelLayout l = channel_layout(c, V);
      const auto backward_partial = backward_partial_kernel<T, V>;
      CNN_LAUNCH(backward_partial, dim3(static_cast<unsigned>(l.tiles), static_cast<unsigned>(splits)),
                 l.block(), stream, static_cast<const T*>(dy), static_cast<const T*>(y), static_cast<const T*>(x), act,
                 static_cast<const A*>(mean), static_cast<const A*>(invstd), m, c, rows_per_split, part_dz, part_dz_xhat);
    });
    CNN_LAUNCH(sums_finish_kernel<A>, grid_for(c, kThreads), kThreads, stream, static_cast<const A*>(part_dz),
               static_cast<const A*>(part_dz_xhat), splits, c, static_cast<A*>(sum_dz), static_cast<A*>(sum_dz_xhat));
  });
}

void batch_norm_backward_input(DType dt, const void* dy, const void* y, const void* x, int64_t m, int64_t c,
                               const void* mean, const void* invstd, const void* weight, const void* /*bias*/,
                               const void* sum_dz, const void* sum_dz_xhat, bool training, BatchNormActivation act,
                               void* dx, void* dresidual, void*, Stream stream) {
  check_mask_source(act, y, "batch_norm_backward_input");
  if (m * c == 0) return;
  dispatch_floating(dt, "batch_norm_backward_input", [&](auto tag) {
    using T = decltype(tag);
    using A = compute_t<T>;
    with_vector_width<T>(c, {dy, y, x, dx, dresidual}, [&](auto width) {
      constexpr int V = decltype(width)::value;
      const ChannelLayout l = channel_layout(c, V);
      const auto input_gradient = backward_input_kernel<T, V>;
      CNN_LAUNCH(input_gradient, dim3(static_cast<unsigned>(l.tiles), elementwise_row_blocks(m, l)),
                 l.block(), stream, static_cast<const T*>(dy), static_cast<const T*>(y), static_cast<const T*>(x), m, c,
                 static_cast<const A*>(mean), static_cast<const A*>(invstd), static_cast<const A*>(weight),
                 static_cast<const A*>(sum_dz), static_cast<const A*>(sum_dz_xhat), training, act, static_cast<T*>(dx),
                 static_cast<T*>(dresidual));
    });
  });
}

}  // namespace cnn::kernels::cuda
