// The multi-tensor kernel shared by the optimizer and weight-averaging kernels: one grid strides
// over the concatenation of a table's tensors (kernels/optimizer.h), each thread walking the table
// and applying Update to the elements of each tensor that fall to it (element e of the
// concatenation to thread e % threads, so that small tensors spread over different threads).
// Update: a functor type with `using Args = ...;` and
// `__device__ void operator()(const Args&, const MultiTensorSlot&, int64_t i) const`.
#pragma once
#include "kernels/cuda/launch.cuh"
#include "kernels/optimizer.h"

namespace cnn::kernels::cuda {

template <class Update>
__global__ void multi_tensor_kernel(const MultiTensorSlot* slots, int count, typename Update::Args args) {
  const int64_t thread = CNN_GLOBAL_INDEX, threads = CNN_GRID_STRIDE;
  for (int t = 0; t < count; ++t) {
    const MultiTensorSlot s = slots[t];
    for (int64_t i = first_element(s, thread, threads); i < s.numel; i += threads) Update()(args, s, i);
  }
}

// One launch of multi_tensor_kernel<Update> over `count` slots of `total` elements together.
template <class Update>
void launch_multi_tensor(const MultiTensorSlot* slots, int count, int64_t total, const typename Update::Args& args, Stream stream) {
  if (count == 0 || total == 0) return;
  CNN_LAUNCH(multi_tensor_kernel<Update>, grid_for(total, kBlockThreads), kBlockThreads, stream, slots, count, args);
}

}  // namespace cnn::kernels::cuda
