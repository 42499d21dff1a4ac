// Loss-scale pass on CUDA: unscale every gradient of a group, sum their squares and count inf/nan
// elements; then the step's verdict (step_control) in one thread.
// How: (1) the shared multi-tensor launch (kernels/cuda/multi_tensor.cuh): the table travels as
// kernel parameters, each block takes one chunk of one tensor at a time, and each thread unscales
// its elements and accumulates its sum of squares (finite elements only) and non-finite count; a
// shared-memory tree per block writes one (sum, count) pair per block to `partials` (the launches
// of a table of more than kSlotsPerLaunch tensors share the kLossScaleMaxBlocks pairs). (2) one
// block sums the pairs in a fixed order into result[0..1]. No atomics, so the result is the same on
// every run. The loss scale is read on the device from the control block when one is given.
// Memory traffic: reads each gradient element once, and writes it once when the scale is not 1;
// 8 bytes per block of partials.
#include <algorithm>

#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/multi_tensor.cuh"
#include "kernels/loss_scale.h"

namespace cnn::kernels::cuda {

namespace {
constexpr int kThreads = kBlockThreads;

__device__ bool is_finite(float v) { return v - v == 0.f; }  // false for inf (inf - inf is nan) and nan

__global__ void unscale_partials_kernel(const SlotBatch batch, DType dt, float inv_scale, const float* control,
                                        float* partials) {
  __shared__ float scratch[kThreads];
  if (control != nullptr) inv_scale = 1.f / control[kStepControlScale];
  float sum_squares = 0.f, non_finite = 0.f;
  for (int64_t chunk = blockIdx.x; chunk < batch.chunks(); chunk += gridDim.x) {
    const int t = slot_of_chunk(batch, chunk);
    int64_t begin = 0, end = 0;
    chunk_range(batch, t, chunk, begin, end);
    for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
      const float g = unscale_element(dt, batch.slots[t].grad, i, inv_scale);
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

__global__ void step_control_kernel(const float* result, StepControlArgs args, float* control) {
  if (threadIdx.x == 0) update_step_control(args, result, control);
}
}  // namespace

void unscale_and_check(const MultiTensorSlot* slots, int count, int64_t /*total*/, DType grad_dtype, float inv_scale,
                       const float* control, float* partials, float* result, Stream stream) {
  const int launches = (count + kSlotsPerLaunch - 1) / kSlotsPerLaunch;
  const int64_t blocks_per_launch = std::max<int64_t>(1, kLossScaleMaxBlocks / std::max(launches, 1));
  int used = 0;  // partial pairs written so far
  for_each_slot_batch(slots, count, [&](const SlotBatch& batch) {
    const unsigned blocks = static_cast<unsigned>(std::min<int64_t>(std::max<int64_t>(batch.chunks(), 1), blocks_per_launch));
    CNN_LAUNCH(unscale_partials_kernel, blocks, kThreads, stream, batch, grad_dtype, inv_scale, control,
               partials + 2 * used);
    used += static_cast<int>(blocks);
  });
  CNN_LAUNCH(sum_partials_kernel, 1, kThreads, stream, static_cast<const float*>(partials), used, result);
}

void step_control(const float* result, const StepControlArgs& args, float* control, Stream stream) {
  CNN_LAUNCH(step_control_kernel, 1, 1, stream, result, args, control);
}

}  // namespace cnn::kernels::cuda
