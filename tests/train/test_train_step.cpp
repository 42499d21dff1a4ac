// The training step with activations in f64 (what cnn_forward --compute f64 runs for the recipe
// comparison with PyTorch): the f32 master gradients are the exact f64 gradients rounded once, so
// nothing in the step (the loss included) computes in float32.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>

#include "engine/cnn.h"
#include "small_run.h"
#include "train/config/config.h"
#include "train/learner.h"
#include "train/log/console.h"
#include "train/run_log.h"
#include "train/train_settings.h"
#include "train/train_step.h"

using namespace cnn;
using namespace cnn::train;

namespace {

// Float32 values between a and b, both finite floats of one sign or zero (0 when equal).
int64_t ulps_apart(float a, float b) {
  int32_t ia = 0, ib = 0;
  std::memcpy(&ia, &a, sizeof ia);
  std::memcpy(&ib, &b, sizeof ib);
  if ((ia < 0) != (ib < 0)) return std::abs(int64_t{ia & 0x7fffffff}) + std::abs(int64_t{ib & 0x7fffffff});
  return std::abs(int64_t{ia} - int64_t{ib});
}

}  // namespace

TEST_CASE("training step in f64 activations: the master gradients are the f64 gradients rounded once to float32") {
  testing::ScratchDir dir("train_step_f64");
  TrainSettings settings = from_config(Config::parse(testing::config_text(dir.path, dir.path / "runs"), "test.ini",
                                                     {"train.label_smoothing=0.1", "data.batch_size=8", "model.dropout=0"}));
  settings.precision.compute = DType::f64;
  std::ostringstream quiet;
  Console console(quiet, LogLevel::normal, ProgressMode::lines, false);
  RunLog log(console, {});
  Learner learner = build_learner(settings, 1, log);
  const Tensor images = Tensor::randn({8, 28, 28, 1}, 3, DType::f64);
  const Tensor labels = Tensor::from_vector<int64_t>({0, 1, 2, 3, 3, 2, 1, 0}, {8});
  forward_backward(learner, MicroBatch{.images = images, .labels = labels, .epoch = 0, .index = 1}, settings);

  // The reference: the same model on f64 copies of its masters as leaves, the loss in f64.
  Learner reference = build_learner(settings, 1, log);
  std::vector<Tensor> leaves;
  for (const NamedParameter& p : reference.model->named_parameters()) leaves.push_back(p.tensor.to(DType::f64).requires_grad_());
  reference.model->set_parameters(leaves);
  reference.model->train(true);
  {
    Tape tape;
    Tensor loss;
    {
      Tape::Recording recording(tape);
      loss = cross_entropy(reference.model->forward(images), labels, 0.1);
    }
    tape.backward(loss);
  }

  const std::vector<NamedParameter> masters = learner.model->named_parameters();
  REQUIRE(masters.size() == leaves.size());
  int64_t elements = 0, apart = 0;
  for (size_t i = 0; i < masters.size(); ++i) {
    CAPTURE(masters[i].name);
    const Tensor got = masters[i].tensor.grad();
    REQUIRE(got.dtype() == DType::f32);
    const std::vector<double> ours = got.to_doubles(), exact = leaves[i].grad().to_doubles();
    for (size_t j = 0; j < ours.size(); ++j, ++elements)
      apart += ulps_apart(static_cast<float>(ours[j]), static_cast<float>(exact[j])) > 1;
  }
  // Rounding the same f64 value twice gives the same float; the two f64 computations differ only in
  // their last bits, so a float one step apart is possible where an exact value sits on a boundary.
  CHECK(elements > 10000);
  CHECK(apart == 0);
}

TEST_CASE("training step: forward, backward, unscale, clip and update never wait for the device") {
  // Run under a HostSyncCheck: any value read back to the host (a loss, a verdict, a norm, a count)
  // or any synchronisation inside the step throws. The loss scaler's scale and verdict, the clipping
  // coefficient and the step counts live on the device, so the step can run ahead of the GPU, and a
  // CUDA graph could capture it.
  const std::vector<std::vector<std::string>> variants = {
      {"precision.mode=fp32", "train.label_smoothing=0.1"},
      {"precision.mode=bf16", "model.dropout=0.2"},
      {"precision.mode=fp16", "train.mixup=0.2", "train.cutmix=1.0", "optim.name=adamw"}};
  for (std::vector<std::string> overrides : variants) {
    CAPTURE(overrides[0]);
    overrides.insert(overrides.end(), {"optim.clip_grad_norm=1.0", "data.batch_size=8"});
    testing::check_steps_never_wait_for_the_device(overrides);
  }
  // The check itself: a read inside it is refused, naming the read and the stretch.
  HostSyncCheck check("a test stretch");
  CHECK_THROWS_WITH_AS(Tensor::zeros({1}).item(),
                       doctest::Contains("reading a tensor's values on the host during a test stretch: it makes the host wait"),
                       Error);
}
