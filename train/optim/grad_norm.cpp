// The unscale-and-measure pass over gradient tensors, through kernels/loss_scale.h.
#include "train/optim/grad_norm.h"

#include <cmath>
#include <map>
#include <tuple>

#include "engine/backend.h"
#include "engine/graph.h"
#include "engine/cnn.h"
#include "kernels/loss_scale.h"
#include "train/optim/multi_tensor.h"

namespace cnn::train {

namespace {
// One slot table per (device, dtype) of the gradients.
struct GradientTable {
  SlotTable table;
  DType dtype = DType::f32;
};

std::vector<GradientTable> gradient_tables(const std::vector<Tensor>& grads) {
  std::map<std::tuple<int, int, int>, GradientTable> tables;
  for (const Tensor& g : grads) {
    if (!g.defined()) continue;
    CNN_CHECK(g.dtype() == DType::f32 || g.dtype() == DType::f16 || g.dtype() == DType::bf16,
              "gradient unscaling: gradient ", describe(g), " is not f32, f16 or bf16");
    const Device d = g.device();
    GradientTable& entry = tables[{static_cast<int>(d.type), d.index, static_cast<int>(g.dtype())}];
    entry.table.device = d;
    entry.dtype = g.dtype();
    entry.table.add(g.numel()).grad = g.data();
  }
  std::vector<GradientTable> out;
  for (auto& [key, entry] : tables) out.push_back(std::move(entry));
  return out;
}

// The pass over one table: {sum of squares, inf/nan count} on its device.
Tensor measure_table(const GradientTable& entry, float inv_scale, const float* control) {
  const SlotTable& table = entry.table;
  Tensor result = Tensor::empty({2}, DType::f32, table.device);
  Tensor partials;  // CUDA's per-block partial results; the CPU needs none
  if (table.device.is_cuda()) partials = Tensor::empty({2 * kernels::kLossScaleMaxBlocks}, DType::f32, table.device);
  // The slot table by value on CUDA; kept with a graph capturing CPU work (engine/graph.h).
  const kernels::MultiTensorSlot* slots = graph_capture::kept(table.slots).data();
  CNN_KERNEL(table.device, unscale_and_check, slots, static_cast<int>(table.slots.size()), table.total, entry.dtype,
             inv_scale, control, partials.defined() ? partials.data_as<float>() : nullptr, result.data_as<float>());
  return result;
}
}  // namespace

GradientStats unscale_and_measure(const std::vector<Tensor>& grads, double inv_scale) {
  double sum_squares = 0;
  double non_finite = 0;
  for (const GradientTable& entry : gradient_tables(grads)) {
    const std::vector<double> r = measure_table(entry, static_cast<float>(inv_scale), nullptr).to_doubles();
    sum_squares += r[0];
    non_finite += r[1];
  }
  return {std::sqrt(sum_squares), static_cast<int64_t>(non_finite)};
}

Tensor unscale_and_measure_on_device(const std::vector<Tensor>& grads, const Tensor& control) {
  Tensor total = Tensor::zeros({2}, DType::f32, control.device());
  for (const GradientTable& entry : gradient_tables(grads)) {
    CNN_CHECK(entry.table.device == control.device(), "gradient unscaling: gradients on ", entry.table.device.str(),
              " but the loss scale is on ", control.device().str(), "; every gradient must be on the training device");
    const Tensor result = measure_table(entry, 1.f, control.data_as<float>());
    NoGrad no_grad;
    add_(total, result);
  }
  return total;
}

double clip_coefficient(double norm, double max_norm) {
  if (max_norm <= 0) return 1.0;
  const double c = max_norm / (norm + 1e-6);
  return c < 1.0 ? c : 1.0;
}

}  // namespace cnn::train
