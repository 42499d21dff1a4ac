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
  step_and_count(slots, count, args, sgd_update);
}

void optimizer_step(const MultiTensorSlot* slots, int count, int64_t /*total*/, const AdamWArgs& args, Stream) {
  step_and_count(slots, count, args, adamw_update);
}

}  // namespace cnn::kernels::cpu
