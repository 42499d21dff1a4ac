// The CPU reference's walk over a multi-tensor slot table (kernels/optimizer.h). The tensors are cut
// into chunks of kSlotChunk elements (a small tensor is one chunk) and one OpenMP loop shares all
// the chunks of the table among the threads: one parallel region per table, not one per tensor, and
// no small tensor left to a single thread while the others wait. A chunk is also the unit of any
// reduction (kernels/cpu/loss_scale.cpp), whose partial results are combined in chunk order, so
// that they do not depend on the number of threads.
//
// for_each_element: the step's gate first (apply_step_control), each tensor's per-slot preparation
// (prepare_slot), then the shared element update, update(args, slot, i), over every element.
// Returns whether the update applied. Used by the optimizer and weight-averaging kernels.
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

#include "kernels/optimizer.h"

namespace cnn::kernels::cpu {

constexpr int64_t kSlotChunk = 32768;

struct SlotChunk {
  int slot;
  int64_t begin, end;  // elements [begin, end) of the slot
};

inline std::vector<SlotChunk> slot_chunks(const MultiTensorSlot* slots, int count) {
  std::vector<SlotChunk> chunks;
  for (int t = 0; t < count; ++t)
    for (int64_t begin = 0; begin < slots[t].numel; begin += kSlotChunk)
      chunks.push_back({t, begin, std::min(slots[t].numel, begin + kSlotChunk)});
  return chunks;
}

// fn(chunk_index, chunk) for every chunk, the chunks shared among the threads when there are several.
template <class Fn>
void for_each_chunk(const std::vector<SlotChunk>& chunks, Fn fn) {
  const auto count = static_cast<int64_t>(chunks.size());
#pragma omp parallel for schedule(static) if (count > 1)
  for (int64_t c = 0; c < count; ++c) fn(c, chunks[static_cast<size_t>(c)]);
}

template <class Args, class Update>
bool for_each_element(const MultiTensorSlot* slots, int count, Args args, Update update) {
  if (!apply_step_control(args)) return false;
  std::vector<MultiTensorSlot> prepared(slots, slots + count);
  for (MultiTensorSlot& s : prepared) prepare_slot(args, s);
  for_each_chunk(slot_chunks(slots, count), [&](int64_t, const SlotChunk& chunk) {
    const MultiTensorSlot& s = prepared[static_cast<size_t>(chunk.slot)];
    for (int64_t i = chunk.begin; i < chunk.end; ++i) update(args, s, i);
  });
  return true;
}

}  // namespace cnn::kernels::cpu
