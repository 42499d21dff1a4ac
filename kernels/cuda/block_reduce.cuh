// Block-wide reductions through shared memory: a tree of halving steps separated by barriers.
// Every thread of the block must call them (they contain __syncthreads); the result is returned to
// all threads. `scratch` is a __shared__ array of kThreads elements owned by the calling kernel.
#pragma once
#include "kernels/common/max_math.h"
#include "kernels/cuda/launch.cuh"

namespace cnn::kernels::cuda {

// combine(a, b) must be associative and commutative (a sum, a maximum).
template <int kThreads, class C, class Combine>
__device__ C block_reduce(C value, C* scratch, Combine combine) {
  const unsigned t = threadIdx.x;
  scratch[t] = value;
  __syncthreads();
  for (unsigned stride = kThreads / 2; stride > 0; stride >>= 1) {
    if (t < stride) scratch[t] = combine(scratch[t], scratch[t + stride]);
    __syncthreads();
  }
  const C result = scratch[0];
  __syncthreads();  // scratch is free for the next reduction only after everyone has read it
  return result;
}

template <class C>
struct Plus {
  __device__ C operator()(C a, C b) const { return a + b; }
};
template <class C>
struct Max {
  __device__ C operator()(C a, C b) const { return max_of(a, b); }  // NaN wins (kernels/common/max_math.h)
};

template <int kThreads, class C>
__device__ C block_sum(C value, C* scratch) {
  return block_reduce<kThreads>(value, scratch, Plus<C>());
}

template <int kThreads, class C>
__device__ C block_max(C value, C* scratch) {
  return block_reduce<kThreads>(value, scratch, Max<C>());
}

}  // namespace cnn::kernels::cuda
