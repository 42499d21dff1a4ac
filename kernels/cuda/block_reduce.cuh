// Block-wide reductions through shared memory: a tree of halving steps separated by barriers.
// Every thread of the block must call them (they contain __syncthreads); the result is returned to
// all threads. `scratch` is a __shared__ array of kThreads elements owned by the calling kernel.
#pragma once
#include "kernels/cuda/launch.cuh"

namespace cnn::kernels::cuda {

template <int kThreads, class C>
__device__ C block_sum(C value, C* scratch) {
  const unsigned t = threadIdx.x;
  scratch[t] = value;
  __syncthreads();
  for (unsigned stride = kThreads / 2; stride > 0; stride >>= 1) {
    if (t < stride) scratch[t] += scratch[t + stride];
    __syncthreads();
  }
  const C total = scratch[0];
  __syncthreads();  // scratch is free for the next reduction only after everyone has read it
  return total;
}

template <int kThreads, class C>
__device__ C block_max(C value, C* scratch) {
  const unsigned t = threadIdx.x;
  scratch[t] = value;
  __syncthreads();
  for (unsigned stride = kThreads / 2; stride > 0; stride >>= 1) {
    if (t < stride && scratch[t + stride] > scratch[t]) scratch[t] = scratch[t + stride];
    __syncthreads();
  }
  const C best = scratch[0];
  __syncthreads();
  return best;
}

}  // namespace cnn::kernels::cuda
