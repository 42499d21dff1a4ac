// CPU reference for softmax, log-softmax and cross-entropy over the last axis. Each row is
// stabilised by its maximum before exponentiation.
#include "kernels/softmax.h"

#include <cmath>

#include "kernels/common/cross_entropy_math.h"
#include "kernels/common/dispatch.h"
#include "kernels/common/half.h"

namespace cnn::kernels::cpu {


void softmax_forward(DType dt, const void* x, void* y, int64_t rows, int64_t cols, bool log) {
  dispatch_floating(dt, "softmax_forward", [&](auto tag) {
    using T = decltype(tag);
    using C = compute_t<T>;
    const T* xs = static_cast<const T*>(x);
    T* ys = static_cast<T*>(y);
#pragma omp parallel for schedule(static) if (rows * cols > 65536)
    for (int64_t r = 0; r < rows; ++r) {
      const T* row = xs + r * cols;
      C mx = to_compute(row[0]);
      for (int64_t c = 1; c < cols; ++c) mx = std::max(mx, to_compute(row[c]));
      C sum = 0;
      for (int64_t c = 0; c < cols; ++c) sum += std::exp(to_compute(row[c]) - mx);
      const C log_sum = std::log(sum);
      for (int64_t c = 0; c < cols; ++c) {
        const C shifted = to_compute(row[c]) - mx;
        ys[r * cols + c] = from_compute<T>(log ? shifted - log_sum : std::exp(shifted) / sum);
      }
    }
  });
}

void softmax_backward(DType dt, const void* y, const void* gy, void* gx, int64_t rows, int64_t cols, bool log) {
  dispatch_floating(dt, "softmax_backward", [&](auto tag) {
    using T = decltype(tag);
    using C = compute_t<T>;
    const T* ys = static_cast<const T*>(y);
    const T* gys = static_cast<const T*>(gy);
    T* gxs = static_cast<T*>(gx);
#pragma omp parallel for schedule(static) if (rows * cols > 65536)
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t base = r * cols;
      C dot = 0;
      for (int64_t c = 0; c < cols; ++c)
        dot += log ? to_compute(gys[base + c]) : to_compute(gys[base + c]) * to_compute(ys[base + c]);
      for (int64_t c = 0; c < cols; ++c) {
        const C yv = to_compute(ys[base + c]), g = to_compute(gys[base + c]);
        gxs[base + c] = from_compute<T>(log ? g - std::exp(yv) * dot : yv * (g - dot));
      }
    }
  });
}

void cross_entropy_forward(DType dt, const void* logits, CrossEntropyTargets targets, void* logp_out,
                           void* row_loss_out, int64_t rows, int64_t cols) {
  dispatch_floating(dt, "cross_entropy_forward", [&](auto tag) {
    using T = decltype(tag);
    using A = compute_t<T>;
    const T* xs = static_cast<const T*>(logits);
    A* logp = static_cast<A*>(logp_out);
    A* row_loss = static_cast<A*>(row_loss_out);
#pragma omp parallel for schedule(static) if (rows * cols > 65536)
    for (int64_t r = 0; r < rows; ++r) {
      const T* row = xs + r * cols;
      double mx = to_compute(row[0]);
      for (int64_t c = 1; c < cols; ++c) mx = std::max(mx, static_cast<double>(to_compute(row[c])));
      double sum = 0;
      for (int64_t c = 0; c < cols; ++c) sum += std::exp(to_compute(row[c]) - mx);
      const double lse = mx + std::log(sum);
      double loss = 0;
      for (int64_t c = 0; c < cols; ++c) {
        const double lp = to_compute(row[c]) - lse;
        logp[r * cols + c] = static_cast<A>(lp);
        loss -= cross_entropy_target<A>(targets, r, c, cols) * lp;
      }
      row_loss[r] = static_cast<A>(loss);
    }
  });
}

void cross_entropy_backward(DType dt, const void* logp_in, CrossEntropyTargets targets, const void* gloss,
                            double scale, void* glogits, int64_t rows, int64_t cols) {
  dispatch_floating(dt, "cross_entropy_backward", [&](auto tag) {
    using T = decltype(tag);
    using A = compute_t<T>;
    const A* logp = static_cast<const A*>(logp_in);
    T* gs = static_cast<T*>(glogits);
    const double g = static_cast<double>(static_cast<const A*>(gloss)[0]) * scale;
#pragma omp parallel for schedule(static) if (rows * cols > 65536)
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c)
        gs[r * cols + c] =
            from_compute<T>(static_cast<compute_t<T>>((std::exp(static_cast<double>(logp[r * cols + c])) -
                                                       cross_entropy_target<A>(targets, r, c, cols)) * g));
  });
}

}  // namespace cnn::kernels::cpu
