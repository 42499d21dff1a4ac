// CPU reference of the weight-averaging kernel: the shared element update over every tensor of the
// table (kernels/cpu/multi_tensor.h).
#include "kernels/weight_average.h"

#include "kernels/cpu/multi_tensor.h"

namespace cnn::kernels::cpu {

void weight_average(const MultiTensorSlot* slots, int count, int64_t /*total*/, const WeightAverageArgs& args, Stream) {
  for_each_element(slots, count, args, [](const WeightAverageArgs& a, const MultiTensorSlot& s, int64_t i) {
    weight_average_update(a, s, i);  // a lambda, so that the update is inlined into the element loop
  });
}

}  // namespace cnn::kernels::cpu
