// CPU reference for softmax, log-softmax and cross-entropy over the last axis: one row at a time,
// in index order, with the row formulas of kernels/common/softmax_math.h and cross_entropy_math.h.
#include "kernels/softmax.h"

#include <cmath>

#include "kernels/common/cross_entropy_math.h"
#include "kernels/common/dispatch.h"
#include "kernels/common/error.h"
#include "kernels/common/half.h"
#include "kernels/common/softmax_math.h"

namespace cnn::kernels::cpu {


void softmax_forward(DType dt, const void* x, void* y, int64_t rows, int64_t cols, bool log, Stream) {
  dispatch_floating(dt, "softmax_forward", [&](auto tag) {
    using T = decltype(tag);
    using C = compute_t<T>;
    const T* xs = static_cast<const T*>(x);
    T* ys = static_cast<T*>(y);
#pragma omp parallel for schedule(static) if (rows * cols > 65536)
    for (int64_t r = 0; r < rows; ++r) {
      const T* row = xs + r * cols;
      C mx = to_compute(row[0]);
      for (int64_t c = 1; c < cols; ++c) mx = max_of(mx, to_compute(row[c]));
      C sum = 0;
      for (int64_t c = 0; c < cols; ++c) sum += exp_shifted(to_compute(row[c]), mx);
      const C log_sum = std::log(sum);
      for (int64_t c = 0; c < cols; ++c)
        ys[r * cols + c] = from_compute<T>(softmax_output(to_compute(row[c]), mx, sum, log_sum, log));
    }
  });
}

void softmax_backward(DType dt, const void* y, const void* gy, void* gx, int64_t rows, int64_t cols, bool log, Stream) {
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
        dot += softmax_backward_term(to_compute(ys[base + c]), to_compute(gys[base + c]), log);
      for (int64_t c = 0; c < cols; ++c)
        gxs[base + c] =
            from_compute<T>(softmax_input_grad(to_compute(ys[base + c]), to_compute(gys[base + c]), dot, log));
    }
  });
}

void cross_entropy_forward(DType dt, const void* logits, CrossEntropyTargets targets, void* logp_out,
                           void* row_loss_out, int64_t rows, int64_t cols, Stream) {
  if (targets.labels != nullptr)
    for (int64_t r = 0; r < rows; ++r)
      CNN_CHECK(targets.labels[r] >= 0 && targets.labels[r] < cols, "cross_entropy: label ", targets.labels[r], " of row ",
                r, " is outside [0, ", cols, ") for ", cols, " classes; check num_classes against the dataset's labels");
  dispatch_floating(dt, "cross_entropy_forward", [&](auto tag) {
    using T = decltype(tag);
    using A = compute_t<T>;
    const T* xs = static_cast<const T*>(logits);
    A* logp = static_cast<A*>(logp_out);
    A* row_loss = static_cast<A*>(row_loss_out);
#pragma omp parallel for schedule(static) if (rows * cols > 65536)
    for (int64_t r = 0; r < rows; ++r) {
      const T* row = xs + r * cols;
      using Acc = CrossEntropyAcc;
      Acc mx = to_compute(row[0]);
      for (int64_t c = 1; c < cols; ++c) mx = max_of<Acc>(mx, to_compute(row[c]));
      Acc sum = 0;
      for (int64_t c = 0; c < cols; ++c) sum += exp_shifted<Acc>(to_compute(row[c]), mx);
      const Acc lse = cross_entropy_log_sum_exp(mx, sum);
      Acc loss = 0;
      for (int64_t c = 0; c < cols; ++c) {
        const Acc lp = to_compute(row[c]) - lse;
        logp[r * cols + c] = static_cast<A>(lp);
        loss -= cross_entropy_loss_term(cross_entropy_target<A>(targets, r, c, cols), lp);
      }
      row_loss[r] = static_cast<A>(loss);
    }
  });
}

void cross_entropy_backward(DType dt, const void* logp_in, CrossEntropyTargets targets, const void* gloss,
                            double scale, void* glogits, int64_t rows, int64_t cols, Stream) {
  dispatch_floating(dt, "cross_entropy_backward", [&](auto tag) {
    using T = decltype(tag);
    using A = compute_t<T>;
    const A* logp = static_cast<const A*>(logp_in);
    T* gs = static_cast<T*>(glogits);
    const CrossEntropyAcc g = static_cast<CrossEntropyAcc>(static_cast<const A*>(gloss)[0]) * scale;
#pragma omp parallel for schedule(static) if (rows * cols > 65536)
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c)
        gs[r * cols + c] = from_compute<T>(
            cross_entropy_logit_grad<A>(logp[r * cols + c], cross_entropy_target<A>(targets, r, c, cols), g));
  });
}

}  // namespace cnn::kernels::cpu
