// CPU reference for the batch-norm kernels: per-channel loops over the M = N*H*W rows of x [M, C],
// accumulating in the accumulate type (double for f64 input, float otherwise) row by row, so the
// result does not depend on the thread count.
#include <vector>

#include "kernels/batch_norm.h"
#include "kernels/common/batch_norm_math.h"
#include "kernels/common/dispatch.h"
#include "kernels/common/half.h"

namespace cnn::kernels::cpu {

namespace {
template <class A>
A at_or(const void* p, int64_t i, A fallback) {
  return p ? static_cast<const A*>(p)[i] : fallback;
}
}  // namespace

void batch_norm_stats(DType dt, const void* x, int64_t m, int64_t c, void* mean_out, void* var_out) {
  dispatch_floating(dt, "batch_norm_stats", [&](auto tag) {
    using T = decltype(tag);
    using A = compute_t<T>;
    const T* xs = static_cast<const T*>(x);
    std::vector<A> sum(static_cast<size_t>(c), A(0)), sq(static_cast<size_t>(c), A(0));
    for (int64_t r = 0; r < m; ++r)
      for (int64_t ch = 0; ch < c; ++ch) sum[ch] += to_compute(xs[r * c + ch]);
    A* mean = static_cast<A*>(mean_out);
    for (int64_t ch = 0; ch < c; ++ch) mean[ch] = sum[ch] / static_cast<A>(m);
    for (int64_t r = 0; r < m; ++r)
      for (int64_t ch = 0; ch < c; ++ch) {
        const A d = to_compute(xs[r * c + ch]) - mean[ch];
        sq[ch] += d * d;
      }
    A* var = static_cast<A*>(var_out);
    for (int64_t ch = 0; ch < c; ++ch) var[ch] = sq[ch] / static_cast<A>(m);
  });
}

void batch_norm_forward(DType dt, const void* x, int64_t m, int64_t c, const void* mean, const void* invstd,
                        const void* weight, const void* bias, const void* residual, BatchNormAct act, void* y) {
  dispatch_floating(dt, "batch_norm_forward", [&](auto tag) {
    using T = decltype(tag);
    using A = compute_t<T>;
    const T* xs = static_cast<const T*>(x);
    const T* rs = static_cast<const T*>(residual);
    T* ys = static_cast<T*>(y);
#pragma omp parallel for schedule(static) if (m * c > 65536)
    for (int64_t r = 0; r < m; ++r)
      for (int64_t ch = 0; ch < c; ++ch) {
        const int64_t i = r * c + ch;
        ys[i] = from_compute<T>(batch_norm_output<A>(to_compute(xs[i]), static_cast<const A*>(mean)[ch],
                                                     static_cast<const A*>(invstd)[ch], at_or<A>(weight, ch, A(1)),
                                                     at_or<A>(bias, ch, A(0)), rs ? A(to_compute(rs[i])) : A(0), act));
      }
  });
}

void batch_norm_backward_reduce(DType dt, const void* dy, const void* y, const void* x, int64_t m, int64_t c,
                                const void* mean, const void* invstd, BatchNormAct act, void* sum_dz_out,
                                void* sum_dz_xhat_out) {
  dispatch_floating(dt, "batch_norm_backward_reduce", [&](auto tag) {
    using T = decltype(tag);
    using A = compute_t<T>;
    const T* dys = static_cast<const T*>(dy);
    const T* ys = static_cast<const T*>(y);
    const T* xs = static_cast<const T*>(x);
    A* sum_dz = static_cast<A*>(sum_dz_out);
    A* sum_dz_xhat = static_cast<A*>(sum_dz_xhat_out);
    for (int64_t ch = 0; ch < c; ++ch) sum_dz[ch] = sum_dz_xhat[ch] = A(0);
    for (int64_t r = 0; r < m; ++r)
      for (int64_t ch = 0; ch < c; ++ch) {
        const int64_t i = r * c + ch;
        const A dz = batch_norm_masked_grad<A>(to_compute(dys[i]), ys ? A(to_compute(ys[i])) : A(1), act);
        const A xhat = (to_compute(xs[i]) - static_cast<const A*>(mean)[ch]) * static_cast<const A*>(invstd)[ch];
        sum_dz[ch] += dz;
        sum_dz_xhat[ch] += dz * xhat;
      }
  });
}

void batch_norm_backward_input(DType dt, const void* dy, const void* y, const void* x, int64_t m, int64_t c,
                               const void* mean, const void* invstd, const void* weight, const void* sum_dz,
                               const void* sum_dz_xhat, bool training, BatchNormAct act, void* dx, void* dresidual) {
  dispatch_floating(dt, "batch_norm_backward_input", [&](auto tag) {
    using T = decltype(tag);
    using A = compute_t<T>;
    const T* dys = static_cast<const T*>(dy);
    const T* ys = static_cast<const T*>(y);
    const T* xs = static_cast<const T*>(x);
    T* dxs = static_cast<T*>(dx);
    T* drs = static_cast<T*>(dresidual);
    const A inv_m = A(1) / static_cast<A>(m);
#pragma omp parallel for schedule(static) if (m * c > 65536)
    for (int64_t r = 0; r < m; ++r)
      for (int64_t ch = 0; ch < c; ++ch) {
        const int64_t i = r * c + ch;
        const A dz = batch_norm_masked_grad<A>(to_compute(dys[i]), ys ? A(to_compute(ys[i])) : A(1), act);
        const A inv = static_cast<const A*>(invstd)[ch];
        const A xhat = (to_compute(xs[i]) - static_cast<const A*>(mean)[ch]) * inv;
        if (drs) drs[i] = from_compute<T>(dz);
        if (dxs)
          dxs[i] = from_compute<T>(batch_norm_input_grad<A>(dz, xhat, inv, at_or<A>(weight, ch, A(1)),
                                                            at_or<A>(sum_dz, ch, A(0)), at_or<A>(sum_dz_xhat, ch, A(0)),
                                                            inv_m, training));
      }
  });
}

}  // namespace cnn::kernels::cpu
