// The CPU reference's walk over a multi-tensor slot table (kernels/optimizer.h): for each tensor, a
// plain loop over its elements (OpenMP over the elements of large tensors) through a shared
// element update, update(args, slot, i). Used by the optimizer and weight-averaging kernels.
#pragma once
#include "kernels/optimizer.h"

namespace cnn::kernels::cpu {

template <class Args, class Update>
void for_each_element(const MultiTensorSlot* slots, int count, const Args& args, Update update) {
  for (int t = 0; t < count; ++t) {
    const MultiTensorSlot& s = slots[t];
#pragma omp parallel for schedule(static) if (s.numel > 32768)
    for (int64_t i = 0; i < s.numel; ++i) update(args, s, i);
  }
}

}  // namespace cnn::kernels::cpu
