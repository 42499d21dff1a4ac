// The multi-tensor launch shared by the optimizer, loss-scale and weight-averaging kernels: a table
// of tensors (kernels/optimizer.h) cut into chunks of kMultiTensorChunk elements, each block taking
// one chunk of one tensor at a time (block b: chunks b, b + gridDim.x, ...), its threads striding
// through the chunk. The block finds its tensor by a binary search over the chunk offsets, once per
// chunk: no per-element search over the table, and every block reads contiguous memory.
// The table travels as kernel parameters (SlotBatch, up to kSlotsPerLaunch tensors per launch,
// about 8 KB; CUDA 12.1+ on Volta and later allows 32 KB): built on the host each step from the
// current gradient pointers, with no upload and no synchronising copy.
// Update: a functor type with `using Args = ...;` and
// `__device__ void operator()(const Args&, const MultiTensorSlot&, int64_t i) const`; the step's
// gate (apply_step_control) and per-slot preparation (prepare_slot) of kernels/optimizer.h apply.
#pragma once
#include <algorithm>

#include "kernels/cuda/launch.cuh"
#include "kernels/optimizer.h"

namespace cnn::kernels::cuda {

#ifdef CNN_CUDA_EMULATION
constexpr int kSlotsPerLaunch = 5;  // small, so that the tests cross launch boundaries
constexpr int64_t kMultiTensorChunk = 96;
#else
constexpr int kSlotsPerLaunch = 96;
constexpr int64_t kMultiTensorChunk = 4096;
#endif

struct SlotBatch {
  MultiTensorSlot slots[kSlotsPerLaunch];
  int64_t first_chunk[kSlotsPerLaunch + 1];  // chunk offsets: slot t owns [first_chunk[t], first_chunk[t + 1])
  int count = 0;
  CNN_HD int64_t chunks() const { return first_chunk[count]; }
};

// The slot of a chunk: the last t with first_chunk[t] <= chunk (empty slots own no chunk).
CNN_HD int slot_of_chunk(const SlotBatch& batch, int64_t chunk) {
  int lo = 0, hi = batch.count - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (batch.first_chunk[mid] <= chunk)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

// Calls fn(batch) for consecutive batches of at most kSlotsPerLaunch slots of the host table.
template <class Fn>
void for_each_slot_batch(const MultiTensorSlot* slots, int count, Fn fn) {
  for (int first = 0; first < count; first += kSlotsPerLaunch) {
    SlotBatch batch;
    batch.count = std::min(kSlotsPerLaunch, count - first);
    batch.first_chunk[0] = 0;
    for (int t = 0; t < batch.count; ++t) {
      batch.slots[t] = slots[first + t];
      batch.first_chunk[t + 1] = batch.first_chunk[t] + (batch.slots[t].numel + kMultiTensorChunk - 1) / kMultiTensorChunk;
    }
    fn(batch);
  }
}

// The first and one-past-last element of `chunk` within its slot.
CNN_HD void chunk_range(const SlotBatch& batch, int slot, int64_t chunk, int64_t& begin, int64_t& end) {
  begin = (chunk - batch.first_chunk[slot]) * kMultiTensorChunk;
  end = begin + kMultiTensorChunk;
  if (end > batch.slots[slot].numel) end = batch.slots[slot].numel;
}

template <class Update>
__global__ void multi_tensor_kernel(const SlotBatch batch, typename Update::Args args) {
  if (!apply_step_control(args)) return;  // the whole grid skips a gated-off step
  for (int64_t chunk = blockIdx.x; chunk < batch.chunks(); chunk += gridDim.x) {
    const int t = slot_of_chunk(batch, chunk);
    MultiTensorSlot s = batch.slots[t];
    prepare_slot(args, s);
    int64_t begin = 0, end = 0;
    chunk_range(batch, t, chunk, begin, end);
    for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) Update()(args, s, i);
  }
}

// After the update: one thread per slot advances its step count, when the step applied.
template <class Args>
__global__ void count_steps_kernel(const SlotBatch batch, Args args) {
  const int t = static_cast<int>(threadIdx.x);
  if (t < batch.count && apply_step_control(args)) count_step(batch.slots[t]);
}

// The launches of multi_tensor_kernel<Update> over `count` slots of a host table.
template <class Update>
void launch_multi_tensor(const MultiTensorSlot* slots, int count, const typename Update::Args& args, Stream stream) {
  for_each_slot_batch(slots, count, [&](const SlotBatch& batch) {
    if (batch.chunks() > 0) CNN_LAUNCH(multi_tensor_kernel<Update>, grid_for(batch.chunks(), 1), kBlockThreads, stream, batch, args);
  });
}

// The step-count launches that follow an optimizer update (one block per batch of slots).
template <class Args>
void launch_count_steps(const MultiTensorSlot* slots, int count, const Args& args, Stream stream) {
  for_each_slot_batch(slots, count, [&](const SlotBatch& batch) {
    bool counted = false;
    for (int t = 0; t < batch.count; ++t) counted = counted || batch.slots[t].step_count != nullptr;
    if (counted) CNN_LAUNCH(count_steps_kernel<Args>, 1, kSlotsPerLaunch, stream, batch, args);
  });
}

}  // namespace cnn::kernels::cuda
