// CPU reference for the batch-norm kernels: per-channel loops over the M = N*H*W rows of x [M, C].
// The per-channel sums (the statistics, and the backward's sum of dz and of dz * xhat) accumulate
// in double, whatever the input type, so that they do not drift with M: a float running sum over
// the 16384 rows of an early ResNet layer loses about M * 2^-24 of its value, and the backward's
// sums cancel almost exactly (a BatchNorm's input gradient sums to zero per channel), so that loss
// reached the gradients of every layer below. The rows are cut into at most 256 blocks of a size
// fixed by M alone; the threads share the blocks, each summed row by row, and the blocks' sums are
// then added in block order, so the result does not depend on the thread count.
#include <algorithm>
#include <type_traits>
#include <vector>

#include "kernels/batch_norm.h"
#include "kernels/common/batch_norm_math.h"
#include "kernels/common/dispatch.h"
#include "kernels/common/half.h"

namespace cnn::kernels::cpu {

namespace {
// A per-channel array, or `fallback` in every channel when p is null; hoisted out of the element
// loops so that they stay branch-free.
template <class A>
std::vector<A> channel_values(const void* p, int64_t c, A fallback) {
  if (!p) return std::vector<A>(static_cast<size_t>(c), fallback);
  const A* v = static_cast<const A*>(p);
  return std::vector<A>(v, v + c);
}

// Rows taken together by the sums' inner loops: their terms are added to each other first, so the
// running sums in memory are loaded and stored once per kRowGroup rows instead of once per row.
constexpr int64_t kRowGroup = 4;  // the grouped loops below add (r0 + r1) + (r2 + r3)

// Per-channel sums of kCount quantities over the m rows: add_rows(r, n, sums) adds the terms of rows
// r .. r + n - 1 (n = kRowGroup, or fewer at a block's end) to sums[k * c + ch] (quantity k, channel
// ch). Returns the kCount * c totals (see the file comment).
template <int kCount, class AddRows>
std::vector<double> channel_sums(int64_t m, int64_t c, AddRows add_rows) {
  const int64_t rows_per_block = std::max<int64_t>(64, (m + 255) / 256);
  const int64_t blocks = (m + rows_per_block - 1) / rows_per_block, width = kCount * c;
  std::vector<double> partial(static_cast<size_t>(blocks * width), 0.0);
#pragma omp parallel for schedule(static) if (m * c > 65536)
  for (int64_t b = 0; b < blocks; ++b) {
    double* sums = partial.data() + b * width;
    const int64_t end = std::min(m, (b + 1) * rows_per_block);
    for (int64_t r = b * rows_per_block; r < end; r += kRowGroup) add_rows(r, std::min(kRowGroup, end - r), sums);
  }
  std::vector<double> total(static_cast<size_t>(width), 0.0);
  for (int64_t b = 0; b < blocks; ++b)
    for (int64_t i = 0; i < width; ++i) total[static_cast<size_t>(i)] += partial[static_cast<size_t>(b * width + i)];
  return total;
}
}  // namespace

namespace {
// The terms of n consecutive rows of x [., c] as a group: x - shift and its square per channel
// (restrict: the two sums share one buffer; see backward_reduce_rows).
template <class T>
inline void stats_rows(const T* __restrict x, int64_t n, const double* __restrict shift, int64_t c,
                       double* __restrict sum, double* __restrict sum_squares) {
  if (n == kRowGroup) {
    for (int64_t ch = 0; ch < c; ++ch) {
      double d[kRowGroup];
      for (int64_t k = 0; k < kRowGroup; ++k) d[k] = static_cast<double>(to_compute(x[k * c + ch])) - shift[ch];
      sum[ch] += (d[0] + d[1]) + (d[2] + d[3]);
      sum_squares[ch] += (d[0] * d[0] + d[1] * d[1]) + (d[2] * d[2] + d[3] * d[3]);
    }
    return;
  }
  for (int64_t k = 0; k < n; ++k)
    for (int64_t ch = 0; ch < c; ++ch) {
      const double d = static_cast<double>(to_compute(x[k * c + ch])) - shift[ch];
      sum[ch] += d;
      sum_squares[ch] += d * d;
    }
}
}  // namespace

// One pass over x: the sums of d = x - shift and of d^2, with the first row as the shift, give
// mean = shift + sum/m and var = (sum_squares - sum^2/m)/m. The shift keeps the two sums of the
// size of the spread, not of the mean, so the subtraction loses nothing that matters in double (a
// pass for the mean and a second for the squared deviations gave the same statistics for twice
// the reads of x).
void batch_norm_stats(DType dt, const void* x, int64_t m, int64_t c, void* mean_out, void* var_out, void* /*workspace*/,
                      Stream) {
  dispatch_floating(dt, "batch_norm_stats", [&](auto tag) {
    using T = decltype(tag);
    using A = compute_t<T>;
    const T* xs = static_cast<const T*>(x);
    std::vector<double> shift(static_cast<size_t>(c), 0.0);
    if (m > 0)
      for (int64_t ch = 0; ch < c; ++ch) shift[ch] = static_cast<double>(to_compute(xs[ch]));
    const std::vector<double> sums = channel_sums<2>(m, c, [&](int64_t r, int64_t n, double* acc) {
      stats_rows<T>(xs + r * c, n, shift.data(), c, acc, acc + c);
    });
    A* mean = static_cast<A*>(mean_out);
    A* var = static_cast<A*>(var_out);
    const double rows = static_cast<double>(m);
    for (int64_t ch = 0; ch < c; ++ch) {
      const double sum = sums[ch], sum_squares = sums[c + ch];
      mean[ch] = static_cast<A>(shift[ch] + sum / rows);
      var[ch] = static_cast<A>(std::max(0.0, (sum_squares - sum * sum / rows) / rows));
    }
  });
}

void batch_norm_update_stats(DType acc, const void* mean, const void* var, int64_t c, int64_t m, const void* count,
                             double momentum, double eps, void* invstd, void* running_mean, void* running_var, Stream) {
  CNN_CHECK(acc == DType::f32 || acc == DType::f64, "batch_norm_update_stats: statistics are f32 or f64, got ",
            dtype_name(acc));
  auto update = [&](auto tag) {
    using A = decltype(tag);
    const A *mu = static_cast<const A*>(mean), *v = static_cast<const A*>(var), *n = static_cast<const A*>(count);
    A *inv = static_cast<A*>(invstd), *rm = static_cast<A*>(running_mean), *rv = static_cast<A*>(running_var);
    for (int64_t ch = 0; ch < c; ++ch) {
      inv[ch] = batch_norm_invstd<A>(v[ch], static_cast<A>(eps));
      if (rm)
        batch_norm_running_update<A>(rm[ch], rv[ch], mu[ch], v[ch], n ? static_cast<double>(n[ch]) : static_cast<double>(m),
                                     momentum);
    }
  };
  if (acc == DType::f64) update(double{});
  else update(float{});
}

void batch_norm_forward(DType dt, const void* x, int64_t m, int64_t c, const void* mean, const void* invstd,
                        const void* weight, const void* bias, const void* residual, BatchNormActivation act, void* y,
                        void* /*workspace*/, Stream) {
  dispatch_floating(dt, "batch_norm_forward", [&](auto tag) {
    using T = decltype(tag);
    using A = compute_t<T>;
    const T* xs = static_cast<const T*>(x);
    const T* rs = static_cast<const T*>(residual);
    T* ys = static_cast<T*>(y);
    const std::vector<A> mu = channel_values<A>(mean, c, A(0)), inv = channel_values<A>(invstd, c, A(1)),
                         w = channel_values<A>(weight, c, A(1)), b = channel_values<A>(bias, c, A(0));
    // The activation as a compile-time constant, so that the channel loop is branch-free.
    auto rows = [&](auto act_constant) {
      constexpr BatchNormActivation kAct = decltype(act_constant)::value;
#pragma omp parallel for schedule(static) if (m * c > 65536)
      for (int64_t r = 0; r < m; ++r) {
        const T* xr = xs + r * c;
        const T* rr = kAct == BatchNormActivation::add_relu ? rs + r * c : nullptr;
        T* yr = ys + r * c;
        for (int64_t ch = 0; ch < c; ++ch)
          yr[ch] = from_compute<T>(batch_norm_output<A>(to_compute(xr[ch]), mu[ch], inv[ch], w[ch], b[ch],
                                                        kAct == BatchNormActivation::add_relu ? A(to_compute(rr[ch])) : A(0),
                                                        kAct));
      }
    };
    using Act = BatchNormActivation;
    if (act == Act::add_relu) {
      CNN_CHECK(rs != nullptr, "batch_norm_forward: add_relu needs the residual");
      rows(std::integral_constant<Act, Act::add_relu>{});
    } else if (act == Act::relu) {
      rows(std::integral_constant<Act, Act::relu>{});
    } else {
      rows(std::integral_constant<Act, Act::none>{});
    }
  });
}

namespace {
// The backward loops with the mask and mode as compile-time constants, so that the inner loops over
// the contiguous channels are branch-free and vectorise.
//
// The terms of n consecutive rows of the backward sums (the sum of dz and of dz * xhat), a group of
// kRowGroup rows added to each other first (see channel_sums). The arrays are declared not to
// overlap: the two sums live in one buffer, and without that promise the compiler must assume a
// store to one may change the other, and leaves the loop scalar (about ten times slower).
template <class T, bool kMasked>
inline void backward_reduce_rows(const T* __restrict dy, const T* __restrict y, const T* __restrict x, int64_t n,
                                 int64_t c, const compute_t<T>* __restrict mu, const compute_t<T>* __restrict inv,
                                 double* __restrict sum_dz, double* __restrict sum_dz_xhat) {
  using A = compute_t<T>;
  auto terms = [&](int64_t i, int64_t ch, double& dz_out, double& dz_xhat_out) {
    A dz = to_compute(dy[i]);
    if constexpr (kMasked) dz = batch_norm_relu_grad<A>(dz, to_compute(y[i]));
    dz_out = static_cast<double>(dz);
    dz_xhat_out = dz_out * static_cast<double>(batch_norm_xhat<A>(to_compute(x[i]), mu[ch], inv[ch]));
  };
  if (n == kRowGroup) {
    for (int64_t ch = 0; ch < c; ++ch) {
      double dz[kRowGroup], dz_xhat[kRowGroup];
      for (int64_t k = 0; k < kRowGroup; ++k) terms(k * c + ch, ch, dz[k], dz_xhat[k]);
      sum_dz[ch] += (dz[0] + dz[1]) + (dz[2] + dz[3]);
      sum_dz_xhat[ch] += (dz_xhat[0] + dz_xhat[1]) + (dz_xhat[2] + dz_xhat[3]);
    }
    return;
  }
  for (int64_t k = 0; k < n; ++k)
    for (int64_t ch = 0; ch < c; ++ch) {
      double dz, dz_xhat;
      terms(k * c + ch, ch, dz, dz_xhat);
      sum_dz[ch] += dz;
      sum_dz_xhat[ch] += dz_xhat;
    }
}

template <class T, bool kMasked>
void backward_reduce(const T* dy, const T* y, const T* x, int64_t m, int64_t c, const compute_t<T>* mu,
                     const compute_t<T>* inv, compute_t<T>* sum_dz_out, compute_t<T>* sum_dz_xhat_out) {
  using A = compute_t<T>;
  const std::vector<double> sums = channel_sums<2>(m, c, [&](int64_t r, int64_t n, double* acc) {
    backward_reduce_rows<T, kMasked>(dy + r * c, kMasked ? y + r * c : nullptr, x + r * c, n, c, mu, inv, acc,
                                     acc + c);
  });
  const double *sum_dz = sums.data(), *sum_dz_xhat = sums.data() + c;
  for (int64_t ch = 0; ch < c; ++ch) {
    sum_dz_out[ch] = static_cast<A>(sum_dz[ch]);
    sum_dz_xhat_out[ch] = static_cast<A>(sum_dz_xhat[ch]);
  }
}

template <class T, bool kMasked, bool kTraining>
void backward_input_rows(const T* dy, const T* y, const T* x, int64_t m, int64_t c, const compute_t<T>* mu,
                         const compute_t<T>* inv, const compute_t<T>* w, const compute_t<T>* s1, const compute_t<T>* s2,
                         T* dx, T* dresidual) {
  using A = compute_t<T>;
  const A inv_m = A(1) / static_cast<A>(m);
#pragma omp parallel for schedule(static) if (m * c > 65536)
  for (int64_t r = 0; r < m; ++r)
    for (int64_t ch = 0; ch < c; ++ch) {
      const int64_t i = r * c + ch;
      A dz = to_compute(dy[i]);
      if constexpr (kMasked) dz = batch_norm_relu_grad<A>(dz, to_compute(y[i]));
      if (dresidual) dresidual[i] = from_compute<T>(dz);
      if (dx) {
        const A xhat = batch_norm_xhat<A>(to_compute(x[i]), mu[ch], inv[ch]);
        dx[i] = from_compute<T>(batch_norm_input_grad<A>(dz, xhat, inv[ch], w[ch], s1[ch], s2[ch], inv_m, kTraining));
      }
    }
}
}  // namespace

void batch_norm_backward_reduce(DType dt, const void* dy, const void* y, const void* x, int64_t m, int64_t c,
                                const void* mean, const void* invstd, BatchNormActivation act, void* sum_dz_out,
                                void* sum_dz_xhat_out, void* /*workspace*/, Stream) {
  dispatch_floating(dt, "batch_norm_backward_reduce", [&](auto tag) {
    using T = decltype(tag);
    using A = compute_t<T>;
    A* sum_dz = static_cast<A*>(sum_dz_out);
    A* sum_dz_xhat = static_cast<A*>(sum_dz_xhat_out);
    std::fill(sum_dz, sum_dz + c, A(0));
    std::fill(sum_dz_xhat, sum_dz_xhat + c, A(0));
    const std::vector<A> mu = channel_values<A>(mean, c, A(0)), inv = channel_values<A>(invstd, c, A(1));
    const T *dys = static_cast<const T*>(dy), *ys = static_cast<const T*>(y), *xs = static_cast<const T*>(x);
    if (act != BatchNormActivation::none)
      backward_reduce<T, true>(dys, ys, xs, m, c, mu.data(), inv.data(), sum_dz, sum_dz_xhat);
    else
      backward_reduce<T, false>(dys, ys, xs, m, c, mu.data(), inv.data(), sum_dz, sum_dz_xhat);
  });
}

void batch_norm_backward_input(DType dt, const void* dy, const void* y, const void* x, int64_t m, int64_t c,
                               const void* mean, const void* invstd, const void* weight, const void* sum_dz,
                               const void* sum_dz_xhat, bool training, BatchNormActivation act, void* dx,
                               void* dresidual, void* /*workspace*/, Stream) {
  dispatch_floating(dt, "batch_norm_backward_input", [&](auto tag) {
    using T = decltype(tag);
    using A = compute_t<T>;
    const std::vector<A> mu = channel_values<A>(mean, c, A(0)), inv = channel_values<A>(invstd, c, A(1)),
                         w = channel_values<A>(weight, c, A(1)), s1 = channel_values<A>(sum_dz, c, A(0)),
                         s2 = channel_values<A>(sum_dz_xhat, c, A(0));
    const T *dys = static_cast<const T*>(dy), *ys = static_cast<const T*>(y), *xs = static_cast<const T*>(x);
    T *dxs = static_cast<T*>(dx), *drs = static_cast<T*>(dresidual);
    const bool masked = act != BatchNormActivation::none;
    auto run = [&](auto masked_tag, auto training_tag) {
      backward_input_rows<T, decltype(masked_tag)::value, decltype(training_tag)::value>(
          dys, ys, xs, m, c, mu.data(), inv.data(), w.data(), s1.data(), s2.data(), dxs, drs);
    };
    if (masked && training) run(std::true_type{}, std::true_type{});
    else if (masked) run(std::true_type{}, std::false_type{});
    else if (training) run(std::false_type{}, std::true_type{});
    else run(std::false_type{}, std::false_type{});
  });
}

}  // namespace cnn::kernels::cpu
