// Loss-scale pass on CUDA: unscale every gradient of a group, sum their squares and count inf/nan
// elements, in two launches.
// How: (1) a multi-tensor grid-stride pass over the group's slot table (as in optimizer.cu) where
// each thread unscales its elements and accumulates its sum of squares (finite elements only) and
// non-finite count; a shared-memory tree per block writes one (sum, count) pair per block to
// `partials`. (2) one block sums the pairs in a fixed order into result[0..1]. No atomics, so the
// result is the same on every run.
// Memory traffic: reads each gradient element once, and writes it once when inv_scale != 1;
// 8 bytes per block of partials.
#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/launch.cuh"
#include "kernels/loss_scale.h"

namespace cnn::kernels::cuda {

namespace {
constexpr int kThreads = kBlockThreads;

__device__ bool is_finite(float v) { return v - v == 0.f; }  // false for inf (inf - inf is nan) and nan

__global__ void unscale_partials_kernel(const MultiTensorSlot* slots, int count, DType dt, float inv_scale,
                                        float* partials) {
  __shared__ float scratch[kThreads];
  const int64_t thread = CNN_GLOBAL_INDEX, threads = CNN_GRID_STRIDE;
  float sum_squares = 0.f, non_finite = 0.f;
  for (int t = 0; t < count; ++t) {
    const MultiTensorSlot s = slots[t];
    for (int64_t i = first_element(s, thread, threads); i < s.numel; i += threads) {
      const float g = unscale_element(dt, s.grad, i, inv_scale);
      if (is_finite(g))
        sum_squares += g * g;
      else
        non_finite += 1.f;
    }
  }
  sum_squares = block_sum<kThreads>(sum_squares, scratch);
  non_finite = block_sum<kThreads>(non_finite, scratch);
  if (threadIdx.x == 0) {
    partials[2 * blockIdx.x] = sum_squares;
    partials[2 * blockIdx.x + 1] = non_finite;
  }
}

__global__ void sum_partials_kernel(const float* partials, int blocks, float* result) {
  __shared__ float scratch[kThreads];
  float sum_squares = 0.f, non_finite = 0.f;
  for (int b = static_cast<int>(threadIdx.x); b < blocks; b += kThreads) {
    sum_squares += partials[2 * b];
    non_finite += partials[2 * b + 1];
  }
  sum_squares = block_sum<kThreads>(sum_squares, scratch);
  non_finite = block_sum<kThreads>(non_finite, scratch);
  if (threadIdx.x == 0) {
    result[0] = sum_squares;
    result[1] = non_finite;
  }
}
}  // namespace

void unscale_and_check(const MultiTensorSlot* slots, int count, int64_t total, DType grad_dtype, float inv_scale,
                       float* partials, float* result, Stream stream) {
  unsigned blocks = grid_for(total, kThreads);
  if (blocks > static_cast<unsigned>(kLossScaleMaxBlocks)) blocks = kLossScaleMaxBlocks;
  CNN_LAUNCH(unscale_partials_kernel, blocks, kThreads, stream, slots, count, grad_dtype, inv_scale, partials);
  CNN_LAUNCH(sum_partials_kernel, 1, kThreads, stream, static_cast<const float*>(partials), static_cast<int>(blocks),
             result);
}

}  // namespace cnn::kernels::cuda
