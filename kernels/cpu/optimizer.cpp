// CPU reference of the optimizer kernels: for each tensor of the group, a plain loop over its
// elements (OpenMP over the elements of large tensors) through the shared element updates.
#include "kernels/optimizer.h"

namespace cnn::kernels::cpu {

namespace {
template <class Args, class Update>
void for_each_element(const MultiTensorSlot* slots, int count, const Args& args, Update update) {
  for (int t = 0; t < count; ++t) {
    const MultiTensorSlot& s = slots[t];
#pragma omp parallel for schedule(static) if (s.numel > 32768)
    for (int64_t i = 0; i < s.numel; ++i) update(args, s, i);
  }
}
}  // namespace

void optimizer_step(const MultiTensorSlot* slots, int count, int64_t /*total*/, const SgdArgs& args, Stream) {
  for_each_element(slots, count, args, sgd_update);
}

void optimizer_step(const MultiTensorSlot* slots, int count, int64_t /*total*/, const AdamWArgs& args, Stream) {
  for_each_element(slots, count, args, adamw_update);
}

}  // namespace cnn::kernels::cpu
