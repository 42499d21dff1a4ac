// Batch-norm CUDA kernels over x viewed as [M, C] (NHWC, M = N*H*W).
// Per-channel sums (the mean, the squared deviations, and the backward's sum(dz), sum(dz*xhat)):
//   grid (ceil(C / 32), S), block 32 x 8: each block covers 32 adjacent channels (a warp reads 32
//   consecutive values: coalesced) and 1/S of the rows; the 8 rows of threads stride through them and
//   combine in shared memory; each block writes its partial sums to a workspace [S, C], and a second
//   kernel adds the S partials per channel in a fixed order (deterministic, no atomics).
//   Traffic: one read of x (and of dy, y for the backward) per pass; statistics take two passes
//   (mean, then squared deviations) for accuracy, in float (double for f64).
// Normalisation and the backward's input gradient are grid-stride elementwise passes.
#include "kernels/batch_norm.h"
#include "kernels/common/batch_norm_math.h"
#include "kernels/common/dispatch.h"
#include "kernels/common/half.h"
#include "kernels/cuda/launch.cuh"

namespace cnn::kernels::cuda {

namespace {
constexpr int kThreads = kBlockThreads;
constexpr int kTileC = 32;
constexpr int kTileRows = kThreads / kTileC;
#ifdef CNN_CUDA_EMULATION
constexpr int64_t kMaxSplits = 2;
#else
constexpr int64_t kMaxSplits = 64;
#endif

enum class SumKind { x, squared_deviation, backward };

int64_t splits_for(int64_t m) {
  const int64_t s = (m + 255) / 256;
  return s < 1 ? 1 : (s > kMaxSplits ? kMaxSplits : s);
}

template <class T>
__global__ void partial_sums_kernel(SumKind kind, const T* x, const T* dy, const T* y, BatchNormActivation act,
                                    const compute_t<T>* mean, const compute_t<T>* invstd, int64_t m, int64_t c,
                                    int64_t rows_per_split, compute_t<T>* partial_a, compute_t<T>* partial_b) {
  using A = compute_t<T>;
  __shared__ A shared_a[kTileRows][kTileC];
  __shared__ A shared_b[kTileRows][kTileC];
  const int64_t ch = static_cast<int64_t>(blockIdx.x) * kTileC + threadIdx.x;
  const int64_t split = blockIdx.y;
  const int64_t r0 = split * rows_per_split;
  const int64_t r1 = r0 + rows_per_split < m ? r0 + rows_per_split : m;
  A a = 0, b = 0;
  if (ch < c) {
    for (int64_t r = r0 + threadIdx.y; r < r1; r += kTileRows) {
      const A v = to_compute(x[r * c + ch]);
      if (kind == SumKind::x) {
        a += v;
      } else if (kind == SumKind::squared_deviation) {
        const A d = v - mean[ch];
        a += d * d;
      } else {
        const A dz = batch_norm_masked_grad<A>(to_compute(dy[r * c + ch]), y ? A(to_compute(y[r * c + ch])) : A(1), act);
        a += dz;
        b += dz * batch_norm_xhat<A>(v, mean[ch], invstd[ch]);
      }
    }
  }
  shared_a[threadIdx.y][threadIdx.x] = a;
  shared_b[threadIdx.y][threadIdx.x] = b;
  __syncthreads();
  if (threadIdx.y == 0 && ch < c) {
    A total_a = 0, total_b = 0;
    for (int r = 0; r < kTileRows; ++r) {
      total_a += shared_a[r][threadIdx.x];
      total_b += shared_b[r][threadIdx.x];
    }
    partial_a[split * c + ch] = total_a;
    if (partial_b) partial_b[split * c + ch] = total_b;
  }
}

// out[c] = scale * sum over splits of partial[s, c], in split order.
template <class A>
__global__ void finish_sums_kernel(const A* partial, int64_t splits, int64_t c, A scale, A* out) {
  for (int64_t ch = CNN_GLOBAL_INDEX; ch < c; ch += CNN_GRID_STRIDE) {
    A total = 0;
    for (int64_t s = 0; s < splits; ++s) total += partial[s * c + ch];
    out[ch] = total * scale;
  }
}

template <class T>
__global__ void forward_kernel(const T* x, int64_t m, int64_t c, const compute_t<T>* mean, const compute_t<T>* invstd,
                               const compute_t<T>* weight, const compute_t<T>* bias, const T* residual,
                               BatchNormActivation act, T* y) {
  using A = compute_t<T>;
  const int64_t n = m * c;
  for (int64_t i = CNN_GLOBAL_INDEX; i < n; i += CNN_GRID_STRIDE) {
    const int64_t ch = i % c;
    y[i] = from_compute<T>(batch_norm_output<A>(to_compute(x[i]), mean[ch], invstd[ch], weight ? weight[ch] : A(1),
                                                bias ? bias[ch] : A(0), residual ? A(to_compute(residual[i])) : A(0), act));
  }
}

template <class T>
__global__ void backward_input_kernel(const T* dy, const T* y, const T* x, int64_t m, int64_t c,
                                      const compute_t<T>* mean, const compute_t<T>* invstd, const compute_t<T>* weight,
                                      const compute_t<T>* sum_dz, const compute_t<T>* sum_dz_xhat, bool training,
                                      BatchNormActivation act, T* dx, T* dresidual) {
  using A = compute_t<T>;
  const int64_t n = m * c;
  const A inv_m = A(1) / static_cast<A>(m);
  for (int64_t i = CNN_GLOBAL_INDEX; i < n; i += CNN_GRID_STRIDE) {
    const int64_t ch = i % c;
    const A dz = batch_norm_masked_grad<A>(to_compute(dy[i]), y ? A(to_compute(y[i])) : A(1), act);
    const A xhat = batch_norm_xhat<A>(to_compute(x[i]), mean[ch], invstd[ch]);
    if (dresidual) dresidual[i] = from_compute<T>(dz);
    if (dx)
      dx[i] = from_compute<T>(batch_norm_input_grad<A>(dz, xhat, invstd[ch], weight ? weight[ch] : A(1),
                                                       sum_dz ? sum_dz[ch] : A(0), sum_dz_xhat ? sum_dz_xhat[ch] : A(0),
                                                       inv_m, training));
  }
}

// Runs the partial-sum kernel and the finishing pass(es) for one kind of per-channel sum.
template <class T>
void channel_sums(SumKind kind, const T* x, const T* dy, const T* y, BatchNormActivation act, const compute_t<T>* mean,
                  const compute_t<T>* invstd, int64_t m, int64_t c, compute_t<T> scale, compute_t<T>* out_a,
                  compute_t<T>* out_b, void* workspace, Stream stream) {
  using A = compute_t<T>;
  const int64_t splits = splits_for(m), rows_per_split = (m + splits - 1) / splits;
  A* partial_a = static_cast<A*>(workspace);
  A* partial_b = out_b ? partial_a + splits * c : nullptr;
  const dim3 grid(static_cast<unsigned>((c + kTileC - 1) / kTileC), static_cast<unsigned>(splits));
  CNN_LAUNCH(partial_sums_kernel<T>, grid, dim3(kTileC, kTileRows), stream, kind, x, dy, y, act, mean, invstd, m, c,
             rows_per_split, partial_a, partial_b);
  CNN_LAUNCH(finish_sums_kernel<A>, grid_for(c, kThreads), kThreads, stream, static_cast<const A*>(partial_a), splits, c,
             scale, out_a);
  if (out_b)
    CNN_LAUNCH(finish_sums_kernel<A>, grid_for(c, kThreads), kThreads, stream, static_cast<const A*>(partial_b), splits,
               c, scale, out_b);
}
}  // namespace

size_t batch_norm_workspace_bytes(int64_t m, int64_t c) {
  return static_cast<size_t>(2 * splits_for(m) * c) * sizeof(double);
}

void batch_norm_stats(DType dt, const void* x, int64_t m, int64_t c, void* mean, void* var, void* workspace,
                      Stream stream) {
  dispatch_floating(dt, "batch_norm_stats", [&](auto tag) {
    using T = decltype(tag);
    using A = compute_t<T>;
    const T* xs = static_cast<const T*>(x);
    const A inv_m = A(1) / static_cast<A>(m);
    channel_sums<T>(SumKind::x, xs, nullptr, nullptr, BatchNormActivation::none, nullptr, nullptr, m, c, inv_m,
                    static_cast<A*>(mean), nullptr, workspace, stream);
    channel_sums<T>(SumKind::squared_deviation, xs, nullptr, nullptr, BatchNormActivation::none, static_cast<const A*>(mean),
                    nullptr, m, c, inv_m, static_cast<A*>(var), nullptr, workspace, stream);
  });
}

void batch_norm_forward(DType dt, const void* x, int64_t m, int64_t c, const void* mean, const void* invstd,
                        const void* weight, const void* bias, const void* residual, BatchNormActivation act, void* y, void*,
                        Stream stream) {
  if (m * c == 0) return;
  dispatch_floating(dt, "batch_norm_forward", [&](auto tag) {
    using T = decltype(tag);
    using A = compute_t<T>;
    CNN_LAUNCH(forward_kernel<T>, grid_for(m * c, kThreads), kThreads, stream, static_cast<const T*>(x), m, c,
               static_cast<const A*>(mean), static_cast<const A*>(invstd), static_cast<const A*>(weight),
               static_cast<const A*>(bias), static_cast<const T*>(residual), act, static_cast<T*>(y));
  });
}

void batch_norm_backward_reduce(DType dt, const void* dy, const void* y, const void* x, int64_t m, int64_t c,
                                const void* mean, const void* invstd, BatchNormActivation act, void* sum_dz, void* sum_dz_xhat,
                                void* workspace, Stream stream) {
  dispatch_floating(dt, "batch_norm_backward_reduce", [&](auto tag) {
    using T = decltype(tag);
    using A = compute_t<T>;
    channel_sums<T>(SumKind::backward, static_cast<const T*>(x), static_cast<const T*>(dy), static_cast<const T*>(y), act,
                    static_cast<const A*>(mean), static_cast<const A*>(invstd), m, c, A(1), static_cast<A*>(sum_dz),
                    static_cast<A*>(sum_dz_xhat), workspace, stream);
  });
}

void batch_norm_backward_input(DType dt, const void* dy, const void* y, const void* x, int64_t m, int64_t c,
                               const void* mean, const void* invstd, const void* weight, const void* sum_dz,
                               const void* sum_dz_xhat, bool training, BatchNormActivation act, void* dx, void* dresidual, void*,
                               Stream stream) {
  if (m * c == 0) return;
  dispatch_floating(dt, "batch_norm_backward_input", [&](auto tag) {
    using T = decltype(tag);
    using A = compute_t<T>;
    CNN_LAUNCH(backward_input_kernel<T>, grid_for(m * c, kThreads), kThreads, stream, static_cast<const T*>(dy),
               static_cast<const T*>(y), static_cast<const T*>(x), m, c, static_cast<const A*>(mean),
               static_cast<const A*>(invstd), static_cast<const A*>(weight), static_cast<const A*>(sum_dz),
               static_cast<const A*>(sum_dz_xhat), training, act, static_cast<T*>(dx), static_cast<T*>(dresidual));
  });
}

}  // namespace cnn::kernels::cuda
