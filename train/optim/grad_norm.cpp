// The unscale-and-measure pass over gradient tensors, through kernels/loss_scale.h.
#include "train/optim/grad_norm.h"

#include <cmath>
#include <map>
#include <tuple>

#include "engine/backend.h"
#include "kernels/loss_scale.h"
#include "train/optim/multi_tensor.h"

namespace cnn::train {

GradientStats unscale_and_measure(const std::vector<Tensor>& grads, double inv_scale) {
  // one table per (device, dtype)
  std::map<std::tuple<int, int, int>, std::pair<SlotTable, DType>> tables;
  for (const Tensor& g : grads) {
    if (!g.defined()) continue;
    CNN_CHECK(g.dtype() == DType::f32 || g.dtype() == DType::f16 || g.dtype() == DType::bf16,
              "gradient unscaling: gradient ", describe(g), " is not f32, f16 or bf16");
    const Device d = g.device();
    auto& [table, dtype] = tables[{static_cast<int>(d.type), d.index, static_cast<int>(g.dtype())}];
    table.device = d;
    dtype = g.dtype();
    table.add(g.numel()).grad = g.data();
  }
  double sum_squares = 0;
  double non_finite = 0;
  for (auto& [key, entry] : tables) {
    const auto& [table, dtype] = entry;
    const float inv = static_cast<float>(inv_scale);
    const int count = static_cast<int>(table.slots.size());
    Tensor result = Tensor::zeros({2}, DType::f32, table.device);
    Tensor partials;  // CUDA's per-block partial results; the CPU needs none
    if (table.device.is_cuda()) partials = Tensor::empty({2 * kernels::kLossScaleMaxBlocks}, DType::f32, table.device);
    Tensor device_copy;
    const kernels::MultiTensorSlot* slots = table.kernel_slots(device_copy);
    CNN_KERNEL(table.device, unscale_and_check, slots, count, table.total, dtype, inv,
               partials.defined() ? partials.data_as<float>() : nullptr, result.data_as<float>());
    const std::vector<double> r = result.to_doubles();
    sum_squares += r[0];
    non_finite += r[1];
  }
  return {std::sqrt(sum_squares), static_cast<int64_t>(non_finite)};
}

double clip_coefficient(double norm, double max_norm) {
  if (max_norm <= 0) return 1.0;
  const double c = max_norm / (norm + 1e-6);
  return c < 1.0 ? c : 1.0;
}

}  // namespace cnn::train
