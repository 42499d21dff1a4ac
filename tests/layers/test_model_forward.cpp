// Models running forward and backward: output shapes agree with the shape pass, gradient
// checkpointing changes nothing but memory, random layers are reproducible, BatchNorm keeps its
// statistics, reduced-precision activations train f32 parameters, and small models overfit a batch.
#include <doctest/doctest.h>

#include <cmath>

#include "engine/cnn.h"
#include "layers/activation.h"
#include "layers/batch_norm.h"
#include "layers/blocks/basic_block.h"
#include "layers/blocks/bottleneck.h"
#include "layers/blocks/mbconv.h"
#include "layers/conv2d.h"
#include "layers/dropout.h"
#include "layers/linear.h"
#include "layers/pool.h"
#include "layers/registry.h"
#include "layers/sequential.h"
#include "layers/shape_trace.h"

using namespace cnn;

namespace {
Tensor labels_for(int64_t n, int classes) {
  std::vector<int64_t> labels;
  for (int64_t i = 0; i < n; ++i) labels.push_back((i * 7 + 3) % classes);
  return Tensor::from_vector(labels, {n});
}

struct StepResult {
  double loss = 0;
  Tensor logits;
};

// One forward and backward pass of cross-entropy; gradients accumulate in the parameters.
StepResult forward_backward(Module& model, const Tensor& x, const Tensor& labels) {
  Tape tape;
  StepResult r;
  Tensor loss;
  {
    Tape::Recording rec(tape);
    r.logits = model(x);
    loss = cross_entropy(r.logits, labels);
  }
  tape.backward(loss);
  r.loss = loss.item();
  return r;
}

// Trains on one fixed batch with SGD and momentum 0.9; returns the first and last losses.
std::pair<double, double> overfit(Module& model, const Tensor& x, const Tensor& labels, int steps, double lr) {
  const std::vector<Tensor> params = model.parameters();
  std::vector<Tensor> velocity;
  for (const Tensor& p : params) velocity.push_back(Tensor::zeros(p.shape()));
  double first = 0, last = 0;
  for (int step = 0; step < steps; ++step) {
    const double loss = forward_backward(model, x, labels).loss;
    NoGrad no_grad;
    for (size_t i = 0; i < params.size(); ++i) {
      Tensor p = params[i];
      velocity[i] = add(scale(velocity[i], 0.9), p.grad());
      add_(p, scale(velocity[i], -lr));
      p.zero_grad();
    }
    (step == 0 ? first : last) = loss;
  }
  return {first, last};
}

std::vector<std::vector<double>> gradients(const Module& model) {
  std::vector<std::vector<double>> g;
  for (const Tensor& p : model.parameters()) g.push_back(p.grad().defined() ? p.grad().to_doubles() : std::vector<double>{});
  return g;
}

void check_close(const std::vector<double>& a, const std::vector<double>& b, double tol) {
  REQUIRE(a.size() == b.size());
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::fabs(a[i] - b[i]));
  CHECK(worst <= tol);
}

// A small network of every block type, for quick end-to-end tests.
std::unique_ptr<Sequential> tiny_net(uint64_t seed, double stochastic_depth = 0.0) {
  auto net = std::make_unique<Sequential>("TinyNet");
  net->add("stem", conv_norm_activation({.in_channels = 3, .out_channels = 8, .kernel = 3, .stride = 1}));
  net->add("basic", std::make_unique<BasicBlock>(ResidualSpec{.in_channels = 8, .planes = 8}));
  net->add("mbconv", std::make_unique<MBConv>(MBConvSpec{.expand_ratio = 4,
                                                         .kernel = 3,
                                                         .stride = 1,
                                                         .in_channels = 8,
                                                         .out_channels = 8,
                                                         .stochastic_depth = stochastic_depth}));
  net->add("bottleneck", std::make_unique<Bottleneck>(ResidualSpec{.in_channels = 8, .planes = 4, .stride = 2}));
  net->add("avgpool", std::make_unique<AdaptiveAvgPool2d>(1, 1));
  net->add("flatten", std::make_unique<Flatten>());
  net->add("fc", std::make_unique<Linear>(16, 5))->mark_as_head();
  net->initialize(seed);
  return net;
}
}  // namespace

TEST_CASE("forward output shapes agree with the shape pass") {
  const std::vector<std::tuple<std::string, Shape>> cases = {
      {"compact_cnn", Shape{2, 28, 28, 1}},
      {"cifar_resnet20", Shape{2, 32, 32, 3}},
      {"resnet18", Shape{2, 64, 64, 3}},
      {"resnet50", Shape{1, 32, 32, 3}},
      {"efficientnet_b0", Shape{2, 64, 64, 3}}};
  for (const auto& [name, shape] : cases) {
    INFO(name);
    const auto model = make_model(name, 7, static_cast<int>(shape[3]), 1);
    const Shape expected = trace_shapes(*model, shape).output();
    CHECK(expected == Shape{shape[0], 7});
    NoGrad no_grad;
    model->eval();
    const Tensor y = (*model)(Tensor::randn(shape, 2));
    CHECK(y.shape() == expected);
    for (double v : y.to_doubles()) REQUIRE(std::isfinite(v));
  }
}

TEST_CASE("gradient checkpointing gives the same outputs, gradients and statistics") {
  const Tensor x = Tensor::randn({4, 8, 8, 3}, 3);
  const Tensor labels = labels_for(4, 5);
  auto plain = tiny_net(9, 0.5);
  auto checkpointed = tiny_net(9, 0.5);
  checkpointed->set_gradient_checkpointing(true);
  const StepResult a = forward_backward(*plain, x, labels);
  const StepResult b = forward_backward(*checkpointed, x, labels);
  CHECK(a.logits.to_doubles() == b.logits.to_doubles());
  const auto ga = gradients(*plain), gb = gradients(*checkpointed);
  REQUIRE(ga.size() == gb.size());
  for (size_t i = 0; i < ga.size(); ++i) check_close(ga[i], gb[i], 1e-6);
  // The replay during backward leaves the running statistics and the batch count alone.
  const std::vector<NamedTensor> sa = plain->named_buffers(), sb = checkpointed->named_buffers();
  for (size_t i = 0; i < sa.size(); ++i) {
    INFO(sa[i].name);
    CHECK(sa[i].tensor.to_doubles() == sb[i].tensor.to_doubles());
  }
  CHECK(dynamic_cast<BatchNorm2d&>(checkpointed->submodule("basic.bn1")).num_batches_tracked() == 1);
}

TEST_CASE("random layers: reproducible per seed, fresh masks per call, identity in eval mode") {
  Dropout drop(0.5);
  drop.initialize(1);
  const Tensor x = Tensor::ones({64});
  const std::vector<double> first = drop(x).to_doubles();
  const std::vector<double> second = drop(x).to_doubles();
  // Independent masks: neither equal nor the same mask shifted by a few elements.
  for (size_t shift = 0; shift < 4; ++shift) {
    int same = 0;
    for (size_t i = 0; i + shift < first.size(); ++i) same += first[i + shift] == second[i];
    CHECK(same < 56);
  }
  int zeros = 0;
  for (double v : first) {
    CHECK((v == 0.0 || v == 2.0));
    zeros += v == 0.0;
  }
  CHECK(zeros > 16);
  CHECK(zeros < 48);
  drop.initialize(1);  // the same seed restarts the same stream
  CHECK(drop(x).to_doubles() == first);
  drop.reseed(5);
  CHECK(drop(x).to_doubles() != first);
  drop.eval();
  CHECK(drop(x).to_doubles() == x.to_doubles());

  StochasticDepth depth(0.5);
  depth.initialize(2);
  const std::vector<double> rows = depth(Tensor::ones({32, 2, 2, 1})).to_doubles();
  int dropped = 0;
  for (size_t i = 0; i < rows.size(); i += 4) {
    CHECK(rows[i] == rows[i + 3]);  // a whole sample is dropped or kept
    dropped += rows[i] == 0.0;
  }
  CHECK(dropped > 4);
  CHECK(dropped < 28);
}

TEST_CASE("BatchNorm2d updates its running statistics in training only") {
  BatchNorm2d bn(2);
  bn.initialize(0);
  const Tensor x = Tensor::from_vector<float>({1, 10, 3, 20, 5, 30, 7, 40}, {4, 1, 1, 2});
  bn(x);
  bn(x);
  CHECK(bn.num_batches_tracked() == 2);
  // mean 4 and 25, unbiased variance 20/3 and 500/3; momentum 0.1 twice from 0 and 1
  const std::vector<double> mean = bn.running_mean().to_doubles();
  CHECK(mean[0] == doctest::Approx(0.19 * 4));
  CHECK(mean[1] == doctest::Approx(0.19 * 25));
  CHECK(bn.running_var().to_doubles()[0] == doctest::Approx(0.81 + 0.19 * 20.0 / 3).epsilon(1e-5));
  bn.eval();
  const std::vector<double> y = bn(x).to_doubles();
  CHECK(bn.num_batches_tracked() == 2);
  CHECK(y[0] == doctest::Approx((1 - mean[0]) / std::sqrt(bn.running_var().to_doubles()[0] + 1e-5)).epsilon(1e-5));
}

TEST_CASE("reduced-precision activations train f32 master parameters") {
  auto net = tiny_net(4);
  net->to(DType::bf16);
  const Tensor x = Tensor::randn({4, 8, 8, 3}, 5);  // f32 input, cast at the model's entry
  const StepResult r = forward_backward(*net, x, labels_for(4, 5));
  CHECK(r.logits.dtype() == DType::bf16);
  CHECK(std::isfinite(r.loss));
  for (const NamedParameter& p : net->named_parameters()) {
    INFO(p.name);
    CHECK(p.tensor.dtype() == DType::f32);
    REQUIRE(p.tensor.grad().defined());
    CHECK(p.tensor.grad().dtype() == DType::f32);
  }
  CHECK(net->named_buffers()[0].tensor.dtype() == DType::f32);  // BatchNorm statistics stay f32
}

TEST_CASE("a frozen backbone gets no gradients, the head does") {
  auto net = tiny_net(6);
  net->set_requires_grad(false);
  net->submodule("fc").set_requires_grad(true);
  forward_backward(*net, Tensor::randn({4, 8, 8, 3}, 7), labels_for(4, 5));
  for (const NamedParameter& p : net->named_parameters()) CHECK_MESSAGE(p.tensor.grad().defined() == p.in_head, p.name);
}

TEST_CASE("a tiny model of every block type overfits one batch") {
  auto net = tiny_net(11, 0.1);
  const Tensor x = Tensor::randn({8, 8, 8, 3}, 12);
  const auto [first, last] = overfit(*net, x, labels_for(8, 5), 30, 0.05);
  MESSAGE("loss " << first << " -> " << last);
  CHECK(first > 1.0);
  CHECK(last < 0.1 * first);
}

TEST_CASE("compact_cnn overfits one batch of 28x28 images") {
  const auto model = make_model("compact_cnn", 10, 1, 13);
  const Tensor x = Tensor::randn({10, 28, 28, 1}, 14);
  const auto [first, last] = overfit(*model, x, labels_for(10, 10), 20, 0.02);
  MESSAGE("loss " << first << " -> " << last);
  CHECK(first > 1.5);
  CHECK(last < 0.1 * first);
}
