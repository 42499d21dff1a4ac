// Batch-norm kernels over x viewed as [M, C] (M = N*H*W rows of C channels, NHWC). Statistics,
// weight, bias and the per-channel sums are in the accumulate dtype A (f32, or f64 for f64 input).
// The backward is split into a per-channel reduction and an elementwise pass so that SyncBN can
// all-reduce the per-channel sums between ranks in between.
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/common/dtype.h"

namespace cnn {

// The activation fused after the normalisation: none, relu, or (residual add then relu) as in
// ResNet blocks. One enum for the kernels, the batch_norm2d op and the layers.
enum class BatchNormActivation : uint8_t { none, relu, add_relu };

namespace kernels {

using Stream = void*;

#define CNN_BATCH_NORM_KERNELS(...)                                                                                    \
  /* mean[c] and biased var[c] of x over the M rows (CPU: one pass of shifted sums in double; CUDA: Welford) */     \
  void batch_norm_stats(DType dt, const void* x, int64_t m, int64_t c, void* mean, void* var __VA_ARGS__);             \
  /* y = act((x - mean) * invstd * weight + bias [+ residual]); weight/bias may be null (1 and 0) */                   \
  void batch_norm_forward(DType dt, const void* x, int64_t m, int64_t c, const void* mean, const void* invstd,         \
                          const void* weight, const void* bias, const void* residual, BatchNormActivation act,         \
                          void* y __VA_ARGS__);                                                                        \
  /* dz = dy masked by y > 0 when act is relu/add_relu; sum_dz[c] = sum dz, sum_dz_xhat[c] = sum dz*xhat.   */         \
  /* CPU, act == relu, f32/f64: y may be null, and the mask is then xhat*weight + bias > 0 from x (see below) */         \
  void batch_norm_backward_reduce(DType dt, const void* dy, const void* y, const void* x, int64_t m,                   \
                                  int64_t c, const void* mean, const void* invstd, const void* weight,                 \
                                  const void* bias, BatchNormActivation act, void* sum_dz,                             \
                                  void* sum_dz_xhat __VA_ARGS__);                                                      \
  /* training: dx = weight*invstd*(dz - sum_dz/M - xhat*sum_dz_xhat/M); eval: dx = weight*invstd*dz;     */            \
  /* dresidual = dz (add_relu only; may be null); y may be null as in batch_norm_backward_reduce */                    \
  void batch_norm_backward_input(DType dt, const void* dy, const void* y, const void* x, int64_t m,                    \
                                 int64_t c, const void* mean, const void* invstd, const void* weight,                  \
                                 const void* bias, const void* sum_dz, const void* sum_dz_xhat, bool training,         \
                                 BatchNormActivation act, void* dx, void* dresidual __VA_ARGS__);

// The relu mask without y (CPU only): the forward wrote y = max(0, z) with z = xhat*weight + bias
// (kernels/common/batch_norm_math.h), so y > 0 exactly where z > 0. Computed again from x with the
// same expression in the same type (one inline function, which GCC contracts into an FMA alike in
// both; tests/engine/test_batch_norm_relu_mask.cpp checks values where that matters), z is the same
// number, and the mask the same, for f32 and f64
// where y holds z unrounded; f16/bf16 round z into y (a tiny z can become 0), and a residual is not
// at hand, so those cases keep y. The CPU's backward then reads two arrays instead of three.
// CUDA kernels always take y: nvcc may contract z into an FMA differently in two kernels.
//
// The CUDA reductions (stats, backward_reduce) write per-block partial sums to a caller-provided
// workspace of cuda::batch_norm_workspace_bytes, then add them up in a fixed order: results are
// deterministic. The other CUDA kernels, and every CPU kernel, ignore `workspace` (pass null).
//
// batch_norm_update_stats: invstd[c] = 1 / sqrt(var[c] + eps); when running_mean is not null, also the running statistics
// (PyTorch's momentum; unbiased variance var * n / (n - 1), n = count[c], or m when count is null).
// acc (f32 or f64) is the type of every array. With var = running_var and no running statistics it is
// eval mode's invstd. One small kernel per batch norm, no workspace.
#define CNN_BATCH_NORM_UPDATE_STATS(...)                                                                     \
  void batch_norm_update_stats(DType acc, const void* mean, const void* var, int64_t c, int64_t m,           \
                               const void* count, double momentum, double eps, void* invstd,                 \
                               void* running_mean, void* running_var __VA_ARGS__);

namespace cpu {
// Whether the CPU kernels can take the relu mask from x (y null) for this dtype and activation.
inline bool batch_norm_mask_from_input(DType dt, BatchNormActivation act) {
  return act == BatchNormActivation::relu && (dt == DType::f32 || dt == DType::f64);
}
CNN_BATCH_NORM_KERNELS(, void* workspace = nullptr, Stream stream = nullptr)
CNN_BATCH_NORM_UPDATE_STATS(, Stream stream = nullptr)
}
namespace cuda {
size_t batch_norm_workspace_bytes(DType dt, int64_t m, int64_t c);
CNN_BATCH_NORM_KERNELS(, void* workspace, Stream stream)
CNN_BATCH_NORM_UPDATE_STATS(, Stream stream)
}
#undef CNN_BATCH_NORM_KERNELS
#undef CNN_BATCH_NORM_UPDATE_STATS

}  // namespace kernels
}  // namespace cnn
