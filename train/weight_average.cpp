// Weight averages and swapping them into a model (see weight_average.h).
#include "train/weight_average.h"

#include <exception>

#include "engine/backend.h"
#include "engine/graph.h"
#include "engine/tape.h"
#include "kernels/weight_average.h"
#include "train/eval_support.h"
#include "train/optim/multi_tensor.h"

namespace cnn::train {

io::NamedTensors floating_state(const Module& model) {
  io::NamedTensors out;
  for (const StateEntry& e : model.state_dict())
    if (is_floating(e.tensor.dtype())) out.emplace_back(e.name, e.tensor);
  return out;
}

namespace {
// `t` as the kernel reads it: f32 on `device` (the tensor itself when it already is).
Tensor f32_on(const Tensor& t, const Device& device) {
  return t.dtype() == DType::f32 && t.device() == device ? t : t.to(DType::f32).to(device);
}

io::NamedTensors copies_of(const io::NamedTensors& tensors) {
  io::NamedTensors out;
  for (const auto& [name, t] : tensors) out.emplace_back(name, t.clone());
  return out;
}

io::NamedTensors whole_state(const Module& model) {
  io::NamedTensors out;
  for (const StateEntry& e : model.state_dict()) out.emplace_back(e.name, e.tensor);
  return out;
}
}  // namespace

WeightAverage::WeightAverage(const Module& model, const Device& device) : device_(device) {
  NoGrad no_grad;
  for (const auto& [name, t] : floating_state(model)) tensors_.emplace_back(name, f32_on(t, device).clone());
}

void WeightAverage::update(const Module& model, double weight) {
  NoGrad no_grad;
  const io::NamedTensors current = floating_state(model);
  CNN_CHECK(current.size() == tensors_.size(), "weight average: the model has ", current.size(), " floating tensors, the average ",
            tensors_.size());
  SlotTable table{.device = device_, .slots = {}, .total = 0};
  std::vector<Tensor> sources;  // the model's tensors where the kernel reads them, alive until it has run
  sources.reserve(current.size());
  for (size_t i = 0; i < current.size(); ++i) {
    sources.push_back(f32_on(current[i].second, device_));
    kernels::MultiTensorSlot& s = table.add(tensors_[i].second.numel());
    s.param = static_cast<float*>(sources.back().data());
    s.state1 = static_cast<float*>(tensors_[i].second.data());
  }
  if (table.slots.empty()) return;
  // The slot table by value on CUDA; kept with a graph capturing CPU work (engine/graph.h).
  const kernels::MultiTensorSlot* slots = graph_capture::kept(table.slots).data();
  CNN_KERNEL(device_, weight_average, slots, static_cast<int>(table.slots.size()), table.total,
             kernels::WeightAverageArgs{static_cast<float>(weight)});
}

void WeightAverage::load(const io::NamedTensors& saved, const std::string& source) { restore_tensors(saved, tensors_, source); }

WeightSwap::WeightSwap(Module& model, const WeightAverage* average)
    : model_(model), exceptions_at_start_(std::uncaught_exceptions()) {
  if (!average) return;
  NoGrad no_grad;
  saved_ = copies_of(whole_state(model));
  restore_tensors(average->tensors(), floating_state(model), "the weight average");
  model.refresh_low_precision_copies();
}

WeightSwap::~WeightSwap() noexcept(false) {
  if (saved_.empty()) return;
  try {
    NoGrad no_grad;
    restore_tensors(saved_, whole_state(model_), "the model's own weights");
    model_.refresh_low_precision_copies();
  } catch (...) {
    // Throwing while another exception unwinds would end the process in std::terminate.
    if (std::uncaught_exceptions() == exceptions_at_start_) throw;
  }
}

const char* weights_name(Weights weights) {
  switch (weights) {
    case Weights::ema: return "ema";
    case Weights::swa: return "swa";
    default: return "live";
  }
}

}  // namespace cnn::train
