// Weight averaging (train/ema.h, train/swa.h, train/weight_average.h, train/update_bn.h) on the CPU:
// EMA updates against hand-computed values with and without the decay warm-up, an EMA of constant
// weights equal to them bit for bit, the swap of averaged weights into a model and back, SWA's
// average of three weight sets equal to their mean, SWALR's learning rates, and update_bn's running
// statistics equal to the batch statistics computed directly. End-to-end runs: test_trainer.cpp.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <numbers>
#include <vector>

#include "engine/cnn.h"
#include "layers/batch_norm.h"
#include "layers/linear.h"
#include "layers/registry.h"
#include "train/ema.h"
#include "train/schedule/lr_schedule.h"
#include "train/swa.h"
#include "train/update_bn.h"
#include "train/weight_average.h"

using namespace cnn;
using namespace cnn::train;

namespace {
// Sets a Linear(2, 1)'s weight and bias.
void set_linear(Module& model, const std::vector<float>& weight, float bias) {
  const std::vector<NamedParameter> params = model.named_parameters();
  Tensor(params[0].tensor).copy_(Tensor::from_vector<float>(weight, {1, 2}));
  Tensor(params[1].tensor).copy_(Tensor::from_vector<float>({bias}, {1}));
}

// The average's values in state_dict order, all tensors concatenated.
std::vector<double> values_of(const WeightAverage& average) {
  std::vector<double> all;
  for (const auto& [name, t] : average.tensors()) {
    const std::vector<double> v = t.to_doubles();
    all.insert(all.end(), v.begin(), v.end());
  }
  return all;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() &&
         std::memcmp(a.data(), b.data(), static_cast<size_t>(a.numel() * dtype_size(a.dtype()))) == 0;
}
}  // namespace

TEST_CASE("ema: the decay warm-up is min(decay, (1 + t) / (10 + t))") {
  const EmaSettings timm{.decay = 0.9998};
  CHECK(ema_decay(timm, 0) == doctest::Approx(0.1));
  CHECK(ema_decay(timm, 1) == doctest::Approx(2.0 / 11.0));
  CHECK(ema_decay(timm, 90) == doctest::Approx(91.0 / 100.0));
  CHECK(ema_decay(timm, 1000000) == 0.9998);  // the warm-up is over once (1 + t) / (10 + t) passes it
  CHECK(ema_decay({.decay = 0.9998, .warmup = false}, 0) == 0.9998);
}

TEST_CASE("ema: updates match hand-computed values, with and without the warm-up, every every_steps steps") {
  const std::vector<std::vector<double>> sets = {{2, 2, 0}, {0, 4, 1}, {-1, 1, 5}, {3, 0, -2}};  // weight0, weight1, bias
  for (bool warmup : {true, false}) {
    INFO("warmup " << warmup);
    Linear model(2, 1);
    model.initialize(1);
    set_linear(model, {1, 2}, 3);
    Ema ema(model, {.decay = 0.9, .warmup = warmup, .every_steps = 2});
    std::vector<double> want = {1, 2, 3};
    int64_t step = 0;
    for (const std::vector<double>& x : sets) {
      set_linear(model, {static_cast<float>(x[0]), static_cast<float>(x[1])}, static_cast<float>(x[2]));
      const double t = static_cast<double>(ema.updates());
      const double d = warmup ? std::min(0.9, (1 + t) / (10 + t)) : 0.9;
      for (size_t i = 0; i < 3; ++i) want[i] = d * want[i] + (1 - d) * x[i];
      ema.after_step(model, ++step);  // an odd step: no update
      ema.after_step(model, ++step);  // an even one: the update
      const std::vector<double> got = values_of(ema.average());
      REQUIRE(got.size() == 3);
      for (size_t i = 0; i < 3; ++i) CHECK(got[i] == doctest::Approx(want[i]).epsilon(1e-6));
    }
    CHECK(ema.updates() == 4);
  }
  // By hand, the first two warm-up updates: d = 0.1, then 2/11.
  const double first = 0.1 * 1 + 0.9 * 2, second = 2.0 / 11 * first + 9.0 / 11 * 0;
  Linear model(2, 1);
  model.initialize(1);
  set_linear(model, {1, 2}, 3);
  Ema ema(model, {.decay = 0.9998});
  set_linear(model, {2, 2}, 0);
  ema.update(model);
  CHECK(values_of(ema.average())[0] == doctest::Approx(first).epsilon(1e-7));  // 1.9
  set_linear(model, {0, 4}, 1);
  ema.update(model);
  CHECK(values_of(ema.average())[0] == doctest::Approx(second).epsilon(1e-7));  // 0.345454...
}

TEST_CASE("ema: the EMA of constant weights equals them bit for bit, buffers included") {
  std::unique_ptr<Module> model = make_model("compact_cnn", 4, 1, 7);
  for (bool on_cpu : {false, true}) {
    Ema ema(*model, {.decay = 0.9998, .on_cpu = on_cpu});
    for (int i = 0; i < 30; ++i) ema.update(*model);
    const io::NamedTensors live = floating_state(*model);
    REQUIRE(live.size() == ema.average().tensors().size());
    REQUIRE(live.size() == model->named_parameters().size() + 4);  // and both BatchNorms' running mean and variance
    for (size_t i = 0; i < live.size(); ++i) {
      INFO(live[i].first);
      CHECK(live[i].first == ema.average().tensors()[i].first);
      CHECK(same_bits(live[i].second, ema.average().tensors()[i].second));
    }
  }
}

TEST_CASE("ema: a swap puts the averaged weights and buffers into the model, and the model's own state back exactly") {
  std::unique_ptr<Module> model = make_model("compact_cnn", 4, 1, 7);
  WeightAverage average(*model, Device::cpu());
  std::unique_ptr<Module> other = make_model("compact_cnn", 4, 1, 8);
  {
    NoGrad no_grad;
    for (const StateEntry& e : other->state_dict())  // other running statistics too
      if (e.name.ends_with("running_mean")) Tensor(e.tensor).fill_(0.5);
  }
  average.update(*other, 1.0);  // the average is now `other`'s weights
  std::vector<Tensor> before;
  for (const StateEntry& e : model->state_dict()) before.push_back(e.tensor.clone());
  {
    const WeightSwap swap(*model, &average);
    const std::vector<StateEntry> in = model->state_dict(), want = other->state_dict();
    for (size_t i = 0; i < in.size(); ++i) {
      INFO(in[i].name);
      if (is_floating(in[i].tensor.dtype())) CHECK(same_bits(in[i].tensor, want[i].tensor));
    }
    Tensor(model->named_buffers()[2].tensor).fill_(41);  // num_batches_tracked, changed while swapped (as update_bn does)
  }
  const std::vector<StateEntry> after = model->state_dict();
  for (size_t i = 0; i < after.size(); ++i) CHECK(same_bits(after[i].tensor, before[i]));
}

TEST_CASE("swa: the average of three known weight sets is their mean, and SWA epochs start and step as set") {
  const std::vector<std::vector<float>> sets = {{1, -2, 0.5f}, {4, 0, 1.5f}, {-2, 7, 10}};
  Linear model(2, 1);
  model.initialize(1);
  Swa swa({.start_epoch = 2, .every_epochs = 2});
  CHECK(swa.average() == nullptr);
  int added = 0;
  for (int64_t epoch = 1; epoch <= 6; ++epoch) {
    const std::vector<float>& x = sets[static_cast<size_t>(added % 3)];
    set_linear(model, {x[0], x[1]}, x[2]);
    if (swa.after_epoch(model, epoch)) {
      CHECK(epoch % 2 == 0);  // epochs 2, 4 and 6
      ++added;
    }
  }
  REQUIRE(swa.models() == 3);
  const std::vector<double> got = values_of(*swa.average());
  for (size_t i = 0; i < 3; ++i) {
    const double mean = (static_cast<double>(sets[0][i]) + sets[1][i] + sets[2][i]) / 3.0;
    CHECK(got[i] == doctest::Approx(mean).epsilon(1e-6));
  }
}

TEST_CASE("swa: SWALR anneals from the schedule's rate to swa lr, by epoch, cos or linear") {
  ScheduleOptions o;
  o.kind = ScheduleKind::warmup_cosine;
  o.base_lr = 0.1;
  o.steps_per_epoch = 10;
  o.epochs = 10;
  o.swa_start = 2;
  o.swa_lr = 0.01;
  o.swa_anneal_epochs = 4;
  const LrSchedule plain([&] {
    ScheduleOptions p = o;
    p.swa_start = -1;
    return p;
  }());
  const double lr0 = plain.lr(20);
  const LrSchedule cos(o);
  CHECK(cos.lr(19) == plain.lr(19));  // before SWA: the schedule's
  CHECK(cos.lr(20) == doctest::Approx(lr0));
  CHECK(cos.lr(29) == doctest::Approx(lr0));  // the first SWA epoch at the rate SWA started at
  const double a = 0.5 * (1 - std::cos(std::numbers::pi * 0.25));
  CHECK(cos.lr(30) == doctest::Approx(0.01 * a + lr0 * (1 - a)));
  CHECK(cos.lr(60) == doctest::Approx(0.01));
  CHECK(cos.lr(99) == doctest::Approx(0.01));
  o.swa_anneal_linear = true;
  CHECK(LrSchedule(o).lr(30) == doctest::Approx(0.01 * 0.25 + lr0 * 0.75));
  o.swa_anneal_epochs = 0;
  CHECK(LrSchedule(o).lr(20) == doctest::Approx(0.01));  // no annealing: swa lr from the first SWA epoch
}

TEST_CASE("update_bn: the running statistics become the batch statistics of the model over the data, then momentum is back") {
  std::unique_ptr<Module> model = make_model("compact_cnn", 4, 1, 11);
  std::vector<Tensor> batches;
  for (uint64_t b = 0; b < 3; ++b) batches.push_back(Tensor::randn({8, 28, 28, 1}, 20 + b));
  // Directly: the first BatchNorm's input is the first convolution's output; each batch's
  // per-channel mean and unbiased variance, averaged over the batches with equal weight.
  Module& conv = model->submodule("features.0");
  std::vector<double> want_mean, want_var;
  {
    NoGrad no_grad;
    for (const Tensor& images : batches) {
      const std::vector<double> y = conv.forward(images).to_doubles();
      const size_t channels = 32, n = y.size() / channels;
      want_mean.resize(channels, 0);
      want_var.resize(channels, 0);
      for (size_t c = 0; c < channels; ++c) {
        double sum = 0, squares = 0;
        for (size_t i = 0; i < n; ++i) sum += y[i * channels + c];
        const double m = sum / static_cast<double>(n);
        for (size_t i = 0; i < n; ++i) squares += (y[i * channels + c] - m) * (y[i * channels + c] - m);
        want_mean[c] += m / 3.0;
        want_var[c] += squares / static_cast<double>(n - 1) / 3.0;
      }
    }
  }
  size_t next = 0;
  const int norms = update_batch_norm(*model, [&] { return next < batches.size() ? batches[next++] : Tensor(); });
  CHECK(norms == 2);
  CHECK(next == 3);
  auto& bn = dynamic_cast<BatchNorm2d&>(model->submodule("features.1"));
  CHECK(bn.num_batches_tracked() == 3);
  const std::vector<double> mean = bn.running_mean().to_doubles(), var = bn.running_var().to_doubles();
  for (size_t c = 0; c < want_mean.size(); ++c) {
    INFO("channel " << c);
    CHECK(mean[c] == doctest::Approx(want_mean[c]).epsilon(1e-4));
    CHECK(var[c] == doctest::Approx(want_var[c]).epsilon(1e-4));
  }
  // The usual momentum is back: one more training batch moves the mean by 0.1 of the way.
  const Tensor extra = Tensor::randn({8, 28, 28, 1}, 40);
  std::vector<double> batch_mean(32, 0);
  {
    NoGrad no_grad;
    const std::vector<double> y = conv.forward(extra).to_doubles();
    for (size_t i = 0; i < y.size(); ++i) batch_mean[i % 32] += y[i] / static_cast<double>(y.size() / 32);
    model->forward(extra);
  }
  const std::vector<double> moved = bn.running_mean().to_doubles();
  for (size_t c = 0; c < 32; ++c) CHECK(moved[c] == doctest::Approx(0.9 * mean[c] + 0.1 * batch_mean[c]).epsilon(1e-4));
  CHECK(model->training());
}

TEST_CASE("update_bn: a model without BatchNorm reads no batch") {
  Linear model(2, 1);
  model.initialize(1);
  int calls = 0;
  CHECK(update_batch_norm(model, [&] {
          ++calls;
          return Tensor();
        }) == 0);
  CHECK(calls == 0);
}
