// A Sequential of BatchNorm2d, ReLU and MaxPool2d (compact_cnn's and VGG's stages, ResNet's stem)
// runs them as one batch_norm_relu_max_pool2d call, with the results of the three modules; in eval
// mode a Conv2d before them joins them (conv2d_batch_norm_relu_max_pool2d), and ResNets fold each
// BatchNorm into the convolution before it (conv2d_batch_norm2d).
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "engine/cnn.h"
#include "engine/config.h"
#include "engine/profiler.h"
#include "layers/activation.h"
#include "layers/batch_norm.h"
#include "layers/conv2d.h"
#include "layers/pool.h"
#include "layers/registry.h"
#include "layers/sequential.h"

using namespace cnn;

namespace {
bool same_bits(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() &&
         std::memcmp(a.data(), b.data(), static_cast<size_t>(a.numel()) * dtype_size(a.dtype())) == 0;
}
}  // namespace

TEST_CASE("A Sequential of BatchNorm2d, ReLU and MaxPool2d runs the fused op, with the modules' results") {
  Sequential fused;
  fused.push_back(std::make_unique<BatchNorm2d>(4));
  fused.push_back(std::make_unique<Activation>(ActivationKind::relu));
  fused.push_back(std::make_unique<MaxPool2d>(2));
  fused.initialize(7);
  const Tensor x = Tensor::uniform({2, 6, 6, 4}, -2, 2, 5);
  profiler::start();
  const Tensor y = fused(x);
  const profiler::Recording recording = profiler::stop();
  bool ran_fused = false;
  for (const profiler::Span& span : recording.spans) ran_fused |= span.name == "batch_norm_relu_max_pool_forward";
  CHECK(ran_fused);
  const auto& bn = dynamic_cast<BatchNorm2d&>(fused[0]);
  const Tensor mean = Tensor::zeros({4}), var = Tensor::ones({4});
  const Tensor expected =
      max_pool2d(batch_norm2d(x, bn.weight(), bn.bias(), mean, var, true, 0.1, 1e-5, BatchNormActivation::relu),
                 Pool2dOptions{});
  CHECK(same_bits(y, expected));
  CHECK(same_bits(bn.running_mean(), mean));
  CHECK(same_bits(bn.running_var(), var));
}

TEST_CASE("In eval mode a Sequential of Conv2d, BatchNorm2d, ReLU and MaxPool2d runs the conv-stage op") {
  Sequential stage;
  stage.push_back(std::make_unique<Conv2d>(Conv2dSpec{.in_channels = 1, .out_channels = 32, .kernel = 3, .padding = 1}));
  stage.push_back(std::make_unique<BatchNorm2d>(32));
  stage.push_back(std::make_unique<Activation>(ActivationKind::relu));
  stage.push_back(std::make_unique<MaxPool2d>(2));
  stage.initialize(3);
  const Tensor x = Tensor::uniform({4, 10, 10, 1}, -2, 2, 5);
  {
    // Running statistics away from 0 and 1, so that the normalisation is seen.
    NoGrad no_grad;
    auto& bn = dynamic_cast<BatchNorm2d&>(stage[1]);
    Tensor(bn.running_mean()).copy_(Tensor::uniform({32}, -0.5, 0.5, 8));
    Tensor(bn.running_var()).copy_(Tensor::uniform({32}, 0.5, 2.0, 9));
  }
  // The modules one at a time: the reference.
  const auto one_at_a_time = [&](const Tensor& input) {
    Tensor y = input;
    for (size_t i = 0; i < stage.size(); ++i) y = stage[i](y);
    return y;
  };
  const auto ran_kernel = [](const profiler::Recording& recording, const char* kernel) {
    for (const profiler::Span& span : recording.spans)
      if (span.name == kernel) return true;
    return false;
  };

  SUBCASE("eval, no gradient: the fused kernel, the modules' values up to the convolution's rounding") {
    stage.eval();
    NoGrad no_grad;
    profiler::start();
    const Tensor y = stage(x);
    const profiler::Recording recording = profiler::stop();
    CHECK(ran_kernel(recording, "conv_batch_norm_relu_max_pool_forward"));
    const Tensor expected = one_at_a_time(x);
    REQUIRE(y.shape() == expected.shape());
    const std::vector<double> a = y.to_doubles(), b = expected.to_doubles();
    double worst = 0;
    for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(a[i] - b[i]) / (1 + std::abs(b[i])));
    CHECK(worst < 2e-6);
  }
  SUBCASE("training: the conv, then the BatchNorm + ReLU + max-pool op, the modules' bits") {
    stage.train();
    profiler::start();
    const Tensor y = stage(x);
    const profiler::Recording recording = profiler::stop();
    CHECK_FALSE(ran_kernel(recording, "conv_batch_norm_relu_max_pool_forward"));
    CHECK(ran_kernel(recording, "batch_norm_relu_max_pool_forward"));
    stage.eval();  // the reference must not update the running statistics a second time
    auto& bn = dynamic_cast<BatchNorm2d&>(stage[1]);
    const Tensor expected = max_pool2d(
        batch_norm2d(stage[0](x), bn.weight(), bn.bias(), Tensor(), Tensor(), true, 0.1, 1e-5, BatchNormActivation::relu),
        Pool2dOptions{});
    CHECK(same_bits(y, expected));
  }
}

#if CNN_WITH_ONEDNN
TEST_CASE("In eval mode a Sequential folds Conv2d + BatchNorm2d [+ ReLU] into one convolution, with the modules' values") {
  // conv (with a bias) + BN + ReLU, then conv + BN: both patterns, with running statistics and affine
  // terms away from 0 and 1.
  Sequential seq;
  seq.push_back(std::make_unique<Conv2d>(Conv2dSpec{.in_channels = 4, .out_channels = 6, .kernel = 3, .padding = 1,
                                                    .bias = true}));
  seq.push_back(std::make_unique<BatchNorm2d>(6));
  seq.push_back(std::make_unique<Activation>(ActivationKind::relu));
  seq.push_back(std::make_unique<Conv2d>(Conv2dSpec{.in_channels = 6, .out_channels = 5, .kernel = 1}));
  seq.push_back(std::make_unique<BatchNorm2d>(5));
  seq.initialize(4);
  {
    NoGrad no_grad;
    uint64_t seed = 20;
    for (size_t i : {1, 4}) {
      auto& bn = dynamic_cast<BatchNorm2d&>(seq[i]);
      const int64_t c = bn.running_mean().numel();
      Tensor(bn.running_mean()).copy_(Tensor::uniform({c}, -0.5, 0.5, ++seed));
      Tensor(bn.running_var()).copy_(Tensor::uniform({c}, 0.5, 2.0, ++seed));
      for (const NamedParameter& p : bn.named_parameters()) Tensor(p.tensor).copy_(Tensor::uniform({c}, 0.5, 1.5, ++seed));
    }
  }
  seq.eval();
  NoGrad no_grad;
  const Tensor x = Tensor::uniform({2, 7, 9, 4}, -2, 2, 5);
  const CpuConvolutions before = cpu_convolutions();
  set_cpu_convolutions(CpuConvolutions::onednn);
  profiler::start();
  const Tensor folded = seq(x);
  const profiler::Recording recording = profiler::stop();
  Tensor separate = x;
  for (size_t i = 0; i < seq.size(); ++i) separate = seq[i](separate);  // the modules one at a time
  set_cpu_convolutions(before);
  int folds = 0;
  for (const profiler::Span& span : recording.spans) folds += span.name == "conv2d_batch_norm_forward";
  CHECK(folds == 2);
  const std::vector<double> a = folded.to_doubles(), b = separate.to_doubles();
  REQUIRE(a.size() == b.size());
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(a[i] - b[i]) / (1 + std::abs(b[i])));
  CHECK(worst <= 2e-6);
}

TEST_CASE("In eval mode ResNets fold every BatchNorm into its convolution, with the separate ops' logits") {
  // Every convolution of resnet18 and resnet50 is followed by a BatchNorm: the stem's (before its
  // overlapping max-pool), the blocks' (the last with the residual add and the ReLU) and the
  // downsamples'. With oneDNN each pair is one conv2d_batch_norm_forward; the reference
  // convolutions run the separate ops, which give the same logits up to the rounding of the
  // convolutions' sums.
  for (const char* name : {"resnet18", "resnet50"}) {
    CAPTURE(name);
    auto model = make_model(name, 10, 3, 3);
    NoGrad no_grad;
    const Tensor x = Tensor::uniform({2, 64, 64, 3}, -1, 1, 4);
    model->forward(Tensor::uniform({2, 64, 64, 3}, -1, 1, 5));  // running statistics away from 0 and 1
    model->eval();
    const CpuConvolutions before = cpu_convolutions();
    set_cpu_convolutions(CpuConvolutions::onednn);
    profiler::start();
    const Tensor folded = model->forward(x);
    const profiler::Recording recording = profiler::stop();
    set_cpu_convolutions(CpuConvolutions::reference);
    const Tensor separate = model->forward(x);
    set_cpu_convolutions(before);
    int folds = 0, convolutions = 0, norms = 0;
    for (const profiler::Span& span : recording.spans) {
      folds += span.name == "conv2d_batch_norm_forward";
      convolutions += span.name == "conv2d_forward";
      norms += span.name == "batch_norm_forward";
    }
    CHECK(folds == (std::string(name) == "resnet18" ? 20 : 53));
    CHECK(convolutions == 0);
    CHECK(norms == 0);
    const std::vector<double> a = folded.to_doubles(), b = separate.to_doubles();
    double worst = 0, scale = 0;
    for (size_t i = 0; i < a.size(); ++i) {
      worst = std::max(worst, std::abs(a[i] - b[i]));
      scale = std::max(scale, std::abs(b[i]));
    }
    CHECK(worst <= 1e-4 * (1 + scale));
  }
}
#endif
