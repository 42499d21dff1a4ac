// Softmax, log-softmax and cross-entropy over the last axis of a [rows, cols] tensor.
#pragma once
#include <cstdint>

#include "kernels/common/dtype.h"

namespace cnn::kernels {

using Stream = void*;

// Targets of a cross-entropy: integer labels with optional label smoothing, or a soft distribution.
struct CrossEntropyTargets {
  const int64_t* labels = nullptr;  // [rows], or null when soft is given
  const void* soft = nullptr;       // [rows, cols] probabilities in the accumulate dtype, or null
  double smoothing = 0.0;           // q = (1 - smoothing) * onehot + smoothing / cols
};

#define CNN_SOFTMAX_KERNELS(...)                                                                           \
  void softmax_forward(DType dt, const void* x, void* y, int64_t rows, int64_t cols, bool log              \
                           __VA_ARGS__);                                                                   \
  /* From the forward output y: softmax gx = y * (gy - sum(gy * y)); log-softmax gx = gy - exp(y) sum(gy) */ \
  void softmax_backward(DType dt, const void* y, const void* gy, void* gx, int64_t rows, int64_t cols,     \
                        bool log __VA_ARGS__);                                                             \
  /* row_loss[r] = -sum_k q[r,k] * logp[r,k]; logp ([rows, cols]) is kept for the backward. logp,   */   \
  /* row_loss, soft targets and gloss are in accumulate_dtype(dt): f64 for f64, f32 otherwise.       */   \
  /* A label outside [0, cols): a cnn::Error on the CPU; a NaN loss on CUDA (no way to report it).   */   \
  void cross_entropy_forward(DType dt, const void* logits, CrossEntropyTargets targets, void* logp,        \
                             void* row_loss, int64_t rows, int64_t cols __VA_ARGS__);                      \
  /* glogits = (exp(logp) - q) * gloss[0] * scale, where gloss is a one-element buffer */                  \
  void cross_entropy_backward(DType dt, const void* logp, CrossEntropyTargets targets, const void* gloss,   \
                              double scale, void* glogits, int64_t rows, int64_t cols __VA_ARGS__);

namespace cpu {
CNN_SOFTMAX_KERNELS(, Stream stream = nullptr)
}
namespace cuda {
CNN_SOFTMAX_KERNELS(, Stream stream)
}
#undef CNN_SOFTMAX_KERNELS

}  // namespace cnn::kernels
