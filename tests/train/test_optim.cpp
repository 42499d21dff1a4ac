// Optimizers (train/optim): SGD, Nesterov SGD and AdamW steps against values computed by hand from
// the torch.optim formulas, parameter groups (no decay for 1-D parameters, head learning-rate
// multiplier), frozen parameters, gradient clipping by global norm, low-precision weight copies,
// and optimizer state save/restore.
#include <doctest/doctest.h>

#include <cmath>
#include <memory>

#include "engine/cnn.h"
#include "train/optim/adamw.h"
#include "train/optim/grad_norm.h"
#include "train/optim/sgd.h"

using namespace cnn;
using namespace cnn::train;

namespace {
// A parameter [1, -2] (of the given shape) with gradient [0.5, 0.25].
Tensor param(const Shape& shape) {
  Tensor p = Tensor::from_vector<float>({1.0f, -2.0f}, shape);
  p.requires_grad_();
  p.set_grad(Tensor::from_vector<float>({0.5f, 0.25f}, shape));
  return p;
}

void set_grad(const Tensor& p, std::vector<float> g) { p.set_grad(Tensor::from_vector<float>(g, p.shape())); }

void check_values(const Tensor& t, const std::vector<double>& want) {
  const std::vector<double> got = t.to_doubles();
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) CHECK(got[i] == doctest::Approx(want[i]).epsilon(1e-6));
}

ParamGroupOptions decay_options(double weight_decay, double head_lr_mult = 1.0) {
  ParamGroupOptions o;
  o.weight_decay = weight_decay;
  o.head_prefix = "fc";
  o.head_lr_mult = head_lr_mult;
  return o;
}
}  // namespace

TEST_CASE("parameter groups: 1-D parameters without decay, the head with its own learning rate") {
  const io::NamedTensors params = {{"conv1.weight", Tensor::zeros({4, 3, 3, 2})}, {"bn1.weight", Tensor::zeros({4})},
                                   {"bn1.bias", Tensor::zeros({4})},              {"fc.weight", Tensor::zeros({10, 4})},
                                   {"fc.bias", Tensor::zeros({10})},              {"fcx.weight", Tensor::zeros({2, 2})}};
  const std::vector<ParamGroup> groups = make_param_groups(params, decay_options(0.05, 10.0));
  REQUIRE(groups.size() == 4);
  CHECK(groups[0].name == "decay");
  CHECK(groups[0].params.size() == 2);  // conv1.weight and fcx.weight: "fc" is a whole name component
  CHECK(groups[0].weight_decay == 0.05);
  CHECK(groups[1].name == "no_decay");
  CHECK(groups[1].weight_decay == 0.0);
  CHECK(groups[1].params[1].first == "bn1.bias");
  CHECK(groups[2].name == "head_decay");
  CHECK(groups[2].lr_mult == 10.0);
  CHECK(groups[3].params[0].first == "fc.bias");
  ParamGroupOptions all_decay = decay_options(0.05);
  all_decay.no_decay_1d = false;
  all_decay.head_prefix = "";
  CHECK(make_param_groups(params, all_decay).size() == 1);
  CHECK(has_name_prefix("layer1.0.conv1.weight", "layer1"));
  CHECK(has_name_prefix("layer1.0.conv1.weight", "layer1.0"));
  CHECK_FALSE(has_name_prefix("layer10.weight", "layer1"));
}

TEST_CASE("SGD with momentum and weight decay, per group, as torch.optim.SGD") {
  const Tensor w = param({1, 2}), b = param({2}), head = param({1, 2});
  SGD sgd(make_param_groups({{"w", w}, {"b", b}, {"fc.weight", head}}, decay_options(0.01, 10.0)), {0.9, false});
  sgd.step(0.1);
  check_values(w, {0.949, -2.023});    // g + wd p = [0.51, 0.23]; buf = that; p -= 0.1 buf
  check_values(b, {0.95, -2.025});     // 1-D: no weight decay
  check_values(head, {0.49, -2.23});   // head: lr 0.1 x 10
  sgd.step(0.1);                       // same gradients again
  check_values(w, {0.852151, -2.066677});  // buf = 0.9 [0.51, 0.23] + [0.50949, 0.22977]
  check_values(b, {0.855, -2.0725});       // buf = 0.9 [0.5, 0.25] + [0.5, 0.25]
  CHECK(sgd.steps_of("w") == 2);
}

TEST_CASE("SGD with Nesterov momentum, and without momentum") {
  const Tensor w = param({2});
  ParamGroupOptions o = decay_options(0.01);
  o.no_decay_1d = false;
  SGD nesterov(make_param_groups({{"w", w}}, o), {0.9, true});
  nesterov.step(0.1);
  check_values(w, {0.9031, -2.0437});  // g = [0.51, 0.23] + 0.9 buf
  nesterov.step(0.1);
  check_values(w, {0.76507411, -2.10594697});

  const Tensor v = param({2});
  SGD plain(make_param_groups({{"v", v}}, {}), {0.0, false});
  plain.step(0.5);
  check_values(v, {0.75, -2.125});
  CHECK(plain.state().size() == 1);  // only the step count: no momentum buffer
  CHECK_THROWS_WITH_AS(SGD(make_param_groups({{"v", v}}, {}), {0.0, true}), doctest::Contains("needs a momentum"), Error);
}

TEST_CASE("AdamW with decoupled weight decay and bias correction, as torch.optim.AdamW") {
  const Tensor w = param({1, 2}), b = param({2});
  AdamW adamw(make_param_groups({{"w", w}, {"b", b}}, decay_options(0.1)), {});
  adamw.step(0.01);
  // p *= 1 - lr wd; the bias-corrected first step moves each weight by lr against its gradient
  check_values(w, {0.989, -2.008});
  check_values(b, {0.99, -2.01});  // 1-D: no decay
  adamw.step(0.01);
  // m_hat = g and v_hat = g^2 again under constant gradients: another step of lr
  check_values(w, {0.978011, -2.015992});
  check_values(b, {0.98, -2.02});
}

TEST_CASE("AdamW counts steps per parameter: a parameter unfrozen later starts its own bias correction") {
  const Tensor a = param({2}), late = param({2});
  AdamW adamw(make_param_groups({{"a", a}, {"late", late}}, {}), {});
  adamw.set_frozen({"late"}, true);
  adamw.step(0.01);
  check_values(late, {1.0, -2.0});
  CHECK(adamw.steps_of("late") == 0);
  set_grad(a, {0.5f, 0.25f});
  adamw.set_frozen({"late"}, false);
  adamw.step(0.01);
  check_values(late, {0.99, -2.01});  // its first step: exactly lr
  CHECK(adamw.steps_of("a") == 2);
  CHECK(adamw.steps_of("late") == 1);
  CHECK_THROWS_WITH_AS(adamw.set_frozen({"layer9"}, true), doctest::Contains("no parameter name starts with 'layer9'"),
                       Error);
}

TEST_CASE("frozen parameters and parameters without gradients are left alone") {
  const Tensor w = param({2}), frozen = param({2});
  Tensor no_grad = Tensor::from_vector<float>({3.0f}, {1});
  SGD sgd(make_param_groups({{"w", w}, {"layer1.0.w", frozen}, {"n", no_grad}}, {}), {0.9, false});
  sgd.set_frozen({"layer1"}, true);
  CHECK(sgd.gradients().size() == 1);
  sgd.step(0.1);
  check_values(frozen, {1.0, -2.0});
  check_values(no_grad, {3.0});
  check_values(w, {0.95, -2.025});
  sgd.zero_grad();
  CHECK_FALSE(w.grad().defined());
  sgd.step(0.1);  // no gradients: nothing moves
  check_values(w, {0.95, -2.025});
}

TEST_CASE("gradient clipping by global norm, applied inside the optimizer step") {
  Tensor w = Tensor::from_vector<float>({1.0f}, {1}), v = Tensor::from_vector<float>({1.0f}, {1});
  set_grad(w, {3.0f});
  set_grad(v, {4.0f});
  SGD sgd(make_param_groups({{"w", w}, {"v", v}}, {}), {0.0, false});
  const GradientStats stats = unscale_and_measure(sgd.gradients());
  CHECK(stats.norm == doctest::Approx(5.0));
  CHECK(stats.finite());
  const double coefficient = clip_coefficient(stats.norm, 1.0);
  CHECK(coefficient == doctest::Approx(0.2).epsilon(1e-6));
  CHECK(clip_coefficient(stats.norm, 10.0) == 1.0);
  CHECK(clip_coefficient(stats.norm, 0.0) == 1.0);
  sgd.step(1.0, coefficient);
  check_values(w, {1.0 - 0.6});  // the clipped gradient [0.6, 0.8] has norm 1
  check_values(v, {1.0 - 0.8});
}

TEST_CASE("the optimizer writes the low-precision weight copy in the same pass") {
  const Tensor w = param({2});
  Tensor copy = Tensor::zeros({2}, DType::bf16);
  SGD sgd(make_param_groups({{"w", w}}, {}), {0.9, false});
  sgd.set_low_precision_copy("w", copy);
  sgd.step(0.1);
  CHECK(copy.to_doubles() == w.to(DType::bf16).to_doubles());
  CHECK(copy.to_doubles()[0] != 0.0);
  CHECK_THROWS_WITH_AS(sgd.set_low_precision_copy("w", Tensor::zeros({3}, DType::f16)), doctest::Contains("must have its shape"),
                       Error);
  Tensor half_param = Tensor::zeros({2}, DType::f16);
  CHECK_THROWS_WITH_AS(SGD(make_param_groups({{"h", half_param}}, {}), {}), doctest::Contains("f32 master weights"), Error);
}

TEST_CASE("optimizer state saved and restored continues exactly") {
  Tensor w1 = param({2}), w2 = param({2});
  AdamW first(make_param_groups({{"w", w1}}, {}), {});
  first.step(0.01);
  first.step(0.01);
  const io::NamedTensors state = first.state();
  CHECK(state.size() == 3);  // w.step, w.exp_avg, w.exp_avg_sq
  w2.copy_(w1);
  AdamW second(make_param_groups({{"w", w2}}, {}), {});
  second.load_state(state);
  CHECK(second.steps_of("w") == 2);
  set_grad(w1, {0.1f, -0.3f});
  set_grad(w2, {0.1f, -0.3f});
  first.step(0.01);
  second.step(0.01);
  CHECK(w1.to_doubles() == w2.to_doubles());
  io::NamedTensors wrong = state;
  wrong.emplace_back("other.exp_avg", Tensor::zeros({2}));
  CHECK_THROWS_WITH_AS(second.load_state(wrong), doctest::Contains("'other.exp_avg' belongs to no parameter"), Error);
  io::NamedTensors misshaped = {{"w.exp_avg", Tensor::zeros({3})}};
  CHECK_THROWS_WITH_AS(second.load_state(misshaped), doctest::Contains("state 'w.exp_avg' is [3] f32 cpu"), Error);
}

TEST_CASE("SGD, AdamW and the gradient pass on a CUDA device match the CPU (skipped without a GPU)") {
  if (!cuda::is_available()) {
    MESSAGE("skipped: no CUDA device (the kernels run under emulation in the emulated-kernel suite)");
    return;
  }
  for (int which = 0; which < 2; ++which) {
    std::vector<Tensor> on_cpu, on_gpu;
    io::NamedTensors cpu_named, gpu_named;
    for (int i = 0; i < 5; ++i) {
      const Shape shape = i % 2 ? Shape{1000 + i} : Shape{3, 7, 11};
      Tensor p = Tensor::randn(shape, 10 + static_cast<uint64_t>(i));
      p.set_grad(Tensor::randn(shape, 20 + static_cast<uint64_t>(i)));
      Tensor q = p.to(Device::cuda());
      q.set_grad(p.grad().to(Device::cuda()));
      const std::string name = std::string("param").append(std::to_string(i));
      cpu_named.emplace_back(name, p);
      gpu_named.emplace_back(name, q);
    }
    std::unique_ptr<Optimizer> a, b;
    if (which == 0) {
      a = std::make_unique<SGD>(make_param_groups(cpu_named, decay_options(0.01)), SgdOptions{0.9, true});
      b = std::make_unique<SGD>(make_param_groups(gpu_named, decay_options(0.01)), SgdOptions{0.9, true});
    } else {
      a = std::make_unique<AdamW>(make_param_groups(cpu_named, decay_options(0.05)), AdamWOptions{});
      b = std::make_unique<AdamW>(make_param_groups(gpu_named, decay_options(0.05)), AdamWOptions{});
    }
    const GradientStats sa = unscale_and_measure(a->gradients(), 0.5), sb = unscale_and_measure(b->gradients(), 0.5);
    CHECK(sb.norm == doctest::Approx(sa.norm).epsilon(1e-5));
    for (int step = 0; step < 3; ++step) {
      a->step(0.01, 0.7);
      b->step(0.01, 0.7);
    }
    for (size_t i = 0; i < cpu_named.size(); ++i) {
      const std::vector<double> x = cpu_named[i].second.to_doubles(), y = gpu_named[i].second.to_doubles();
      for (size_t k = 0; k < x.size(); ++k) CHECK(y[k] == doctest::Approx(x[k]).epsilon(1e-5));
    }
  }
}
