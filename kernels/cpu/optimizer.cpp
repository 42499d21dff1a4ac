// CPU reference of the optimizer kernels: the shared element updates over every tensor of the
// group (kernels/cpu/multi_tensor.h).
#include "kernels/optimizer.h"

#include "kernels/cpu/multi_tensor.h"

namespace cnn::kernels::cpu {

void optimizer_step(const MultiTensorSlot* slots, int count, int64_t /*total*/, const SgdArgs& args, Stream) {
  for_each_element(slots, count, args, sgd_update);
}

void optimizer_step(const MultiTensorSlot* slots, int count, int64_t /*total*/, const AdamWArgs& args, Stream) {
  for_each_element(slots, count, args, adamw_update);
}

}  // namespace cnn::kernels::cpu
