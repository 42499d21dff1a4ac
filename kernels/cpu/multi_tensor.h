// The CPU reference's walk over a multi-tensor slot table (kernels/optimizer.h): the step's gate
// first (apply_step_control), then for each tensor its per-slot preparation (prepare_slot) and a
// plain loop over its elements (OpenMP over the elements of large tensors) through a shared element
// update, update(args, slot, i). Returns whether the update applied. Used by the optimizer and
// weight-averaging kernels.
#pragma once
#include "kernels/optimizer.h"

namespace cnn::kernels::cpu {

template <class Args, class Update>
bool for_each_element(const MultiTensorSlot* slots, int count, Args args, Update update) {
  if (!apply_step_control(args)) return false;
  for (int t = 0; t < count; ++t) {
    MultiTensorSlot s = slots[t];
    prepare_slot(args, s);
#pragma omp parallel for schedule(static) if (s.numel > 32768)
    for (int64_t i = 0; i < s.numel; ++i) update(args, s, i);
  }
  return true;
}

}  // namespace cnn::kernels::cpu
