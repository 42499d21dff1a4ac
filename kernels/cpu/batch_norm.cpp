// CPU reference for the batch-norm kernels: per-channel loops over the M = N*H*W rows of x [M, C].
// The per-channel sums (the statistics, and the backward's sum of dz and of dz * xhat) accumulate
// in double, whatever the input type, so that they do not drift with M: a float running sum over
// the 16384 rows of an early ResNet layer loses about M * 2^-24 of its value, and the backward's
// sums cancel almost exactly (a BatchNorm's input gradient sums to zero per channel), so that loss
// reached the gradients of every layer below. The row blocks, the relu mask and the rows of each
// pass are in kernels/cpu/batch_norm_rows.h (shared with the fused max-pool kernels). For f16 and
// bf16 inputs each group of four rows is added in float before it joins the double sums
// (kGroupInFloat).
#include <algorithm>
#include <type_traits>
#include <vector>

#include "kernels/batch_norm.h"
#include "kernels/common/batch_norm_math.h"
#include "kernels/common/dispatch.h"
#include "kernels/common/half.h"
#include "kernels/cpu/batch_norm_rows.h"

namespace cnn::kernels::cpu {

using namespace batch_norm_rows;

namespace {
// The terms of n consecutive rows of x [., c] as a group: x - shift and its square per channel
// (restrict: the two sums share one buffer; see backward_reduce_rows).
template <class T>
inline void stats_rows(const T* __restrict x, int64_t n, const double* __restrict shift, int64_t c,
                       double* __restrict sum, double* __restrict sum_squares) {
  if (n == kRowGroup) {
    using G = group_t<T>;
    for (int64_t ch = 0; ch < c; ++ch) {
      G d[kRowGroup];
      const auto s = static_cast<G>(shift[ch]);  // a value of x: exact in either
      for (int64_t k = 0; k < kRowGroup; ++k) d[k] = static_cast<G>(to_compute(x[k * c + ch])) - s;
      sum[ch] += static_cast<double>((d[0] + d[1]) + (d[2] + d[3]));
      sum_squares[ch] += static_cast<double>((d[0] * d[0] + d[1] * d[1]) + (d[2] * d[2] + d[3] * d[3]));
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
  using Act = BatchNormActivation;
  CNN_CHECK(act != Act::add_relu || residual != nullptr, "batch_norm_forward: add_relu needs the residual");
  dispatch_floating(dt, "batch_norm_forward", [&](auto tag) {
    using T = decltype(tag);
    const ChannelParameters<compute_t<T>> p(mean, invstd, weight, bias, c);
    const T* xs = static_cast<const T*>(x);
    const T* rs = static_cast<const T*>(residual);
    T* ys = static_cast<T*>(y);
    auto rows = [&](auto act_constant) {
      constexpr Act kAct = decltype(act_constant)::value;
#pragma omp parallel for schedule(static) if (m * c > 65536)
      for (int64_t r = 0; r < m; ++r)
        forward_row<kAct, T>(xs + r * c, kAct == Act::add_relu ? rs + r * c : nullptr, c, p, ys + r * c);
    };
    if (act == Act::add_relu)
      rows(std::integral_constant<Act, Act::add_relu>{});
    else if (act == Act::relu)
      rows(std::integral_constant<Act, Act::relu>{});
    else
      rows(std::integral_constant<Act, Act::none>{});
  });
}

void batch_norm_backward_reduce(DType dt, const void* dy, const void* y, const void* x, int64_t m, int64_t c,
                                const void* mean, const void* invstd, const void* weight, const void* bias,
                                BatchNormActivation act, void* sum_dz, void* sum_dz_xhat, void* /*workspace*/,
                                Stream) {
  const Mask mask = mask_for(act, y, dt, "batch_norm_backward_reduce");
  dispatch_floating(dt, "batch_norm_backward_reduce", [&](auto tag) {
    using T = decltype(tag);
    using A = compute_t<T>;
    const ChannelParameters<A> p(mean, invstd, weight, bias, c);
    const T *dys = static_cast<const T*>(dy), *ys = static_cast<const T*>(y), *xs = static_cast<const T*>(x);
    with_mask(mask, [&](auto mask_constant) {
      constexpr Mask kMask = decltype(mask_constant)::value;
      const std::vector<double> sums = channel_sums<2>(m, c, [&](int64_t r, int64_t n, double* acc) {
        backward_reduce_rows<T, kMask>(dys + r * c, kMask == Mask::from_output ? ys + r * c : nullptr, xs + r * c, n,
                                       c, p, acc, acc + c);
      });
      store_sums(sums, c, static_cast<A*>(sum_dz), static_cast<A*>(sum_dz_xhat));
    });
  });
}

void batch_norm_backward_input(DType dt, const void* dy, const void* y, const void* x, int64_t m, int64_t c,
                               const void* mean, const void* invstd, const void* weight, const void* bias,
                               const void* sum_dz, const void* sum_dz_xhat, bool training, BatchNormActivation act,
                               void* dx, void* dresidual, void* /*workspace*/, Stream) {
  const Mask mask = mask_for(act, y, dt, "batch_norm_backward_input");
  dispatch_floating(dt, "batch_norm_backward_input", [&](auto tag) {
    using T = decltype(tag);
    using A = compute_t<T>;
    const ChannelParameters<A> p(mean, invstd, weight, bias, c);
    const InputGradientTerms<A> terms(p, sum_dz, sum_dz_xhat, c, m);
    const T *dys = static_cast<const T*>(dy), *ys = static_cast<const T*>(y), *xs = static_cast<const T*>(x);
    T *dxs = static_cast<T*>(dx), *drs = static_cast<T*>(dresidual);
    with_mask(mask, [&](auto mask_constant) {
      with_training(training, [&](auto training_constant) {
        constexpr Mask kMask = decltype(mask_constant)::value;
#pragma omp parallel for schedule(static) if (m * c > 65536)
        for (int64_t r = 0; r < m; ++r)
          backward_input_row<T, kMask, decltype(training_constant)::value>(
              dys + r * c, kMask == Mask::from_output ? ys + r * c : nullptr, xs + r * c, c, terms,
              dxs ? dxs + r * c : nullptr, drs ? drs + r * c : nullptr);
      });
    });
  });
}

}  // namespace cnn::kernels::cpu
