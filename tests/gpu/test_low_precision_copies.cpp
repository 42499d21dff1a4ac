// Cached low-precision weights on a real GPU (Module::keep_low_precision_copies): a bf16 forward and
// backward with the copies gives the CPU's logits and master gradients as casting does, and after an
// SGD step on the device every copy equals the updated master cast to bf16, bit for bit (the
// optimizer kernel writes it with the hardware conversion, the cast kernel likewise).
#include <doctest/doctest.h>

#include <cstring>

#include "engine/cnn.h"
#include "layers/registry.h"
#include "train/optim/param_groups.h"
#include "train/optim/sgd.h"

using namespace cnn;

TEST_CASE("gpu: cached bf16 weights are rewritten by the optimizer's pass to the cast of the updated masters") {
  const auto model = make_model("cifar_resnet20", 10, 3, 7);
  model->to(Device::cuda(0));
  model->to(DType::bf16);
  const std::vector<NamedTensor> copies = model->keep_low_precision_copies();
  REQUIRE(!copies.empty());
  train::ParamGroup group{.name = "all", .params = {}, .lr_mult = 1.0, .weight_decay = 1e-4};
  for (const NamedParameter& p : model->named_parameters()) group.params.emplace_back(p.name, p.tensor);
  train::SGD sgd({group}, {.momentum = 0.9, .nesterov = false});
  for (const NamedTensor& c : copies) sgd.set_low_precision_copy(c.name, c.tensor);

  const Tensor x = Tensor::randn({4, 16, 16, 3}, 3).to(Device::cuda(0));
  for (int step = 0; step < 2; ++step) {
    model->zero_grad();
    Tape tape;
    Tensor loss;
    {
      Tape::Recording recording(tape);
      loss = sum(cast(model->forward(x), DType::f32));
    }
    tape.backward(loss);
    sgd.step(0.05);
  }
  for (const NamedTensor& copy : copies) {
    CAPTURE(copy.name);
    const Tensor master = [&] {
      for (const NamedParameter& p : model->named_parameters())
        if (p.name == copy.name) return p.tensor;
      return Tensor();
    }();
    const Tensor want = cast(master.detach(), DType::bf16).to(Device::cpu());
    const Tensor got = copy.tensor.to(Device::cpu());
    CHECK(std::memcmp(want.data(), got.data(), want.nbytes()) == 0);
  }
}
