// The weight-averaging kernel (EMA and SWA, train/weight_average.h) on a real GPU against the CPU:
// the same model's weights averaged into an f32 copy on each device, three updates with EMA and
// SWA weights; both backends run the same element function, whose multiply-add is an explicit fma
// (kernels/weight_average.h: no compiler's contraction choice in it), so the averages agree bit for bit.
#include <doctest/doctest.h>

#include <cstring>

#include "engine/cnn.h"
#include "layers/registry.h"
#include "train/weight_average.h"

using namespace cnn;

TEST_CASE("gpu: EMA and SWA averages on the GPU equal the CPU's bit for bit") {
  const auto cpu_model = make_model("cifar_resnet20", 10, 3, 11);
  const auto gpu_model = make_model("cifar_resnet20", 10, 3, 11);
  gpu_model->to(Device::cuda(0));
  train::WeightAverage on_cpu(*cpu_model, Device::cpu()), on_gpu(*gpu_model, Device::cuda(0));
  const auto nudge = [](Module& model, double by) {  // the same change of the weights on both devices
    NoGrad no_grad;
    for (const NamedParameter& p : model.named_parameters()) {
      Tensor t = p.tensor;
      t.copy_(mul(t, Tensor::full({}, by, t.dtype(), t.device())));
    }
  };
  for (const double weight : {1.0 - 0.9998, 0.5, 1.0 / 3.0}) {
    nudge(*cpu_model, 1.01);
    nudge(*gpu_model, 1.01);
    on_cpu.update(*cpu_model, weight);
    on_gpu.update(*gpu_model, weight);
  }
  REQUIRE(on_cpu.tensors().size() == on_gpu.tensors().size());
  for (size_t i = 0; i < on_cpu.tensors().size(); ++i) {
    const Tensor& a = on_cpu.tensors()[i].second;
    const Tensor b = on_gpu.tensors()[i].second.to(Device::cpu());
    CAPTURE(on_cpu.tensors()[i].first);
    CHECK(std::memcmp(a.data(), b.data(), a.nbytes()) == 0);
  }
}
