// Softmax, log-softmax and cross-entropy CUDA kernels over the last axis of [rows, cols].
// How: one block of 256 threads per row (grid-stride over rows). Each row is read to find its
// maximum, again for the sum of exponentials (both block reductions in shared memory), and once
// more to write the result: 3 reads + 1 write of the row, with the row usually served from L2 on
// the second and third pass. The backward needs one block reduction (sum of gy*y or of gy) and one
// elementwise pass. The cross-entropy reduces each row in double (CrossEntropyAcc, as the CPU
// reference does), keeps log-probabilities in float (double for f64) for its backward, which is a
// plain grid-stride pass: (exp(logp) - q) * dloss / rows. The row formulas are those of
// kernels/common/softmax_math.h and cross_entropy_math.h.
#include <cmath>

#include "kernels/common/cross_entropy_math.h"
#include "kernels/common/dispatch.h"
#include "kernels/common/half.h"
#include "kernels/common/softmax_math.h"
#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/launch.cuh"
#include "kernels/softmax.h"

namespace cnn::kernels::cuda {

namespace {
constexpr int kThreads = kBlockThreads;

// The row's maximum and its sum of exp(x - max) in the accumulate type A, for every thread of the block.
template <class A, class T>
__device__ void row_max_and_sum_exp(const T* row, int64_t cols, A* scratch, A& max_out, A& sum_out) {
  A mx = to_compute(row[0]);
  for (int64_t c = threadIdx.x; c < cols; c += kThreads) mx = max_of<A>(mx, to_compute(row[c]));
  mx = block_max<kThreads>(mx, scratch);
  A sum = 0;
  for (int64_t c = threadIdx.x; c < cols; c += kThreads) sum += exp_shifted<A>(to_compute(row[c]), mx);
  sum_out = block_sum<kThreads>(sum, scratch);
  max_out = mx;
}

template <class T>
__global__ void softmax_forward_kernel(const T* x, T* y, int64_t rows, int64_t cols, bool log_output) {
  using C = compute_t<T>;
  __shared__ C scratch[kThreads];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* row = x + r * cols;
    C mx, sum;
    row_max_and_sum_exp(row, cols, scratch, mx, sum);
    const C log_sum = std::log(sum);
    for (int64_t c = threadIdx.x; c < cols; c += kThreads)
      y[r * cols + c] = from_compute<T>(softmax_output(to_compute(row[c]), mx, sum, log_sum, log_output));
  }
}

template <class T>
__global__ void softmax_backward_kernel(const T* y, const T* gy, T* gx, int64_t rows, int64_t cols, bool log_output) {
  using C = compute_t<T>;
  __shared__ C scratch[kThreads];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t base = r * cols;
    C dot = 0;
    for (int64_t c = threadIdx.x; c < cols; c += kThreads)
      dot += softmax_backward_term(to_compute(y[base + c]), to_compute(gy[base + c]), log_output);
    dot = block_sum<kThreads>(dot, scratch);
    for (int64_t c = threadIdx.x; c < cols; c += kThreads)
      gx[base + c] =
          from_compute<T>(softmax_input_grad(to_compute(y[base + c]), to_compute(gy[base + c]), dot, log_output));
  }
}

template <class T>
__global__ void cross_entropy_forward_kernel(const T* logits, CrossEntropyTargets targets, compute_t<T>* logp,
                                             compute_t<T>* row_loss, int64_t rows, int64_t cols) {
  using A = compute_t<T>;
  using Acc = CrossEntropyAcc;
  __shared__ Acc scratch[kThreads];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* row = logits + r * cols;
    Acc mx, sum;
    row_max_and_sum_exp(row, cols, scratch, mx, sum);
    const Acc lse = cross_entropy_log_sum_exp(mx, sum);
    Acc loss = 0;
    for (int64_t c = threadIdx.x; c < cols; c += kThreads) {
      const Acc lp = to_compute(row[c]) - lse;
      logp[r * cols + c] = static_cast<A>(lp);
      loss -= cross_entropy_loss_term(cross_entropy_target<A>(targets, r, c, cols), lp);
    }
    loss = block_sum<kThreads>(loss, scratch);
    if (threadIdx.x == 0) {
      // A label outside [0, cols) cannot be reported from here: it makes the loss NaN instead.
      const bool bad_label = !targets.soft && (targets.labels[r] < 0 || targets.labels[r] >= cols);
      row_loss[r] = bad_label ? A(NAN) : static_cast<A>(loss);
    }
  }
}

template <class T>
__global__ void cross_entropy_backward_kernel(const compute_t<T>* logp, CrossEntropyTargets targets,
                                              const compute_t<T>* gloss, double scale, T* glogits, int64_t rows,
                                              int64_t cols) {
  using A = compute_t<T>;
  const CrossEntropyAcc g = static_cast<CrossEntropyAcc>(gloss[0]) * scale;
  const int64_t n = rows * cols;
  for (int64_t j = CNN_GLOBAL_INDEX; j < n; j += CNN_GRID_STRIDE) {
    const int64_t r = j / cols, c = j % cols;
    glogits[j] = from_compute<T>(cross_entropy_logit_grad<A>(logp[j], cross_entropy_target<A>(targets, r, c, cols), g));
  }
}

unsigned row_blocks(int64_t rows) { return static_cast<unsigned>(rows < kMaxBlocks ? rows : kMaxBlocks); }
}  // namespace

void softmax_forward(DType dt, const void* x, void* y, int64_t rows, int64_t cols, bool log, Stream stream) {
  if (rows * cols == 0) return;
  dispatch_floating(dt, "softmax_forward", [&](auto tag) {
    using T = decltype(tag);
    CNN_LAUNCH(softmax_forward_kernel<T>, row_blocks(rows), kThreads, stream, static_cast<const T*>(x),
               static_cast<T*>(y), rows, cols, log);
  });
}

void softmax_backward(DType dt, const void* y, const void* gy, void* gx, int64_t rows, int64_t cols, bool log,
                      Stream stream) {
  if (rows * cols == 0) return;
  dispatch_floating(dt, "softmax_backward", [&](auto tag) {
    using T = decltype(tag);
    CNN_LAUNCH(softmax_backward_kernel<T>, row_blocks(rows), kThreads, stream, static_cast<const T*>(y),
               static_cast<const T*>(gy), static_cast<T*>(gx), rows, cols, log);
  });
}

void cross_entropy_forward(DType dt, const void* logits, CrossEntropyTargets targets, void* logp, void* row_loss,
                           int64_t rows, int64_t cols, Stream stream) {
  if (rows * cols == 0) return;
  dispatch_floating(dt, "cross_entropy_forward", [&](auto tag) {
    using T = decltype(tag);
    using A = compute_t<T>;
    CNN_LAUNCH(cross_entropy_forward_kernel<T>, row_blocks(rows), kThreads, stream, static_cast<const T*>(logits),
               targets, static_cast<A*>(logp), static_cast<A*>(row_loss), rows, cols);
  });
}

void cross_entropy_backward(DType dt, const void* logp, CrossEntropyTargets targets, const void* gloss, double scale,
                            void* glogits, int64_t rows, int64_t cols, Stream stream) {
  if (rows * cols == 0) return;
  dispatch_floating(dt, "cross_entropy_backward", [&](auto tag) {
    using T = decltype(tag);
    using A = compute_t<T>;
    CNN_LAUNCH(cross_entropy_backward_kernel<T>, grid_for(rows * cols, kThreads), kThreads, stream,
               static_cast<const A*>(logp), targets, static_cast<const A*>(gloss), scale, static_cast<T*>(glogits),
               rows, cols);
  });
}

}  // namespace cnn::kernels::cuda
