// Scratch memory for the CUDA kernels that reduce in two stages (per-block partial sums, then a
// fixed-order pass over them): column sums (reduce_middle_sum) and the batch-norm reductions.
// The kernels cannot allocate; the op asks for the size, holds the block in a tensor until the
// kernel is enqueued (the caching allocator reuses it only after the stream's queued work), and
// passes the pointer. The CPU kernels take none.
#pragma once
#include <cstddef>

#include "engine/tensor.h"

namespace cnn {

// `bytes` of device memory on `device`, held by `holder`; null on the CPU or for 0 bytes.
inline void* kernel_workspace(size_t bytes, const Device& device, Tensor& holder) {
  if (device.is_cpu() || bytes == 0) return nullptr;
  holder = Tensor::empty({static_cast<int64_t>(bytes)}, DType::u8, device);
  return holder.data();
}

}  // namespace cnn
