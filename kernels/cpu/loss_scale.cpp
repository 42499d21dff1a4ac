// CPU reference of the loss-scale pass: unscales every gradient, sums the squares (in double) and
// counts non-finite elements, chunk by chunk over the whole table (kernels/cpu/multi_tensor.h), the
// chunks' partial sums added in chunk order (the same total on any number of threads); the step's
// verdict from them.
#include "kernels/loss_scale.h"

#include <cmath>

#include "kernels/cpu/multi_tensor.h"

namespace cnn::kernels::cpu {

void unscale_and_check(const MultiTensorSlot* slots, int count, int64_t /*total*/, DType grad_dtype, float inv_scale,
                       const float* control, float* /*partials*/, float* result, Stream) {
  if (control != nullptr) inv_scale = 1.f / control[kStepControlScale];
  const std::vector<SlotChunk> chunks = slot_chunks(slots, count);
  std::vector<double> sum_squares(chunks.size());
  std::vector<int64_t> non_finite(chunks.size());
  for_each_chunk(chunks, [&](int64_t c, const SlotChunk& chunk) {
    void* grad = slots[chunk.slot].grad;
    double sum = 0;
    int64_t bad = 0;
    for (int64_t i = chunk.begin; i < chunk.end; ++i) {
      const float g = unscale_element(grad_dtype, grad, i, inv_scale);
      if (std::isfinite(g))
        sum += static_cast<double>(g) * g;
      else
        ++bad;
    }
    sum_squares[static_cast<size_t>(c)] = sum;
    non_finite[static_cast<size_t>(c)] = bad;
  });
  double total_squares = 0;
  int64_t total_non_finite = 0;
  for (size_t c = 0; c < chunks.size(); ++c) {
    total_squares += sum_squares[c];
    total_non_finite += non_finite[c];
  }
  result[0] = static_cast<float>(total_squares);
  result[1] = static_cast<float>(total_non_finite);
}

void step_control(const float* result, const StepControlArgs& args, float* control, Stream) {
  update_step_control(args, result, control);
}

}  // namespace cnn::kernels::cpu
