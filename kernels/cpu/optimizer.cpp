// CPU reference of the optimizer kernels: the shared element updates over every tensor of the
// group (kernels/cpu/multi_tensor.h), then the step counts of a step that applied.
#include "kernels/optimizer.h"

#include "kernels/cpu/multi_tensor.h"

namespace cnn::kernels::cpu {

namespace {
template <class Args, class Update>
void step_and_count(const MultiTensorSlot* slots, int count, const Args& args, Update update) {
  if (!for_each_element(slots, count, args, update)) return;
  for (int t = 0; t < count; ++t) count_step(slots[t]);
}
}  // namespace

void optimizer_step(const MultiTensorSlot* slots, int count, int64_t /*total*/, const SgdArgs& args, Stream) {
  // Lambdas rather than function pointers, so that the update is inlined into the element loop.
  step_and_count(slots, count, args, [](const SgdArgs& a, const MultiTensorSlot& s, int64_t i) { sgd_update(a, s, i); });
}

void optimizer_step(const MultiTensorSlot* slots, int count, int64_t /*total*/, const AdamWArgs& args, Stream) {
  step_and_count(slots, count, args,
                 [](const AdamWArgs& a, const MultiTensorSlot& s, int64_t i) { adamw_update(a, s, i); });
}

}  // namespace cnn::kernels::cpu
