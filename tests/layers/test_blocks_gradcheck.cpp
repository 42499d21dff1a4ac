// Gradient checks of every block type on tiny shapes (f64, training mode, so BatchNorm uses the
// batch statistics): the gradients of the input and of every parameter against finite differences.
#include <doctest/doctest.h>

#include "engine/cnn.h"
#include "gradcheck.h"
#include "layers/activation.h"
#include "layers/batch_norm.h"
#include "layers/blocks/basic_block.h"
#include "layers/blocks/bottleneck.h"
#include "layers/blocks/mbconv.h"
#include "layers/blocks/squeeze_excitation.h"
#include "layers/conv2d.h"
#include "layers/dropout.h"
#include "layers/linear.h"
#include "layers/pool.h"
#include "layers/sequential.h"

using namespace cnn;
using namespace cnn::testing;

namespace {
// Checks d(block(x)) / d(x, parameters). Each evaluation reseeds the block, so random layers draw
// the same masks for every finite difference.
void check_module_gradients(Module& block, const Shape& input_shape, uint64_t seed = 1) {
  block.initialize(seed);
  block.to(DType::f64);
  std::vector<Tensor> inputs = {uniform64(input_shape, seed + 100)};
  for (const Tensor& p : block.parameters()) {
    // Away from the initial values (BN scale 1, bias 0) so that every term matters.
    inputs.push_back(uniform64(p.shape(), seed + inputs.size(), 0.5, 1.5));
  }
  const GradCheckResult r = gradcheck(
      [&block](const std::vector<Tensor>& in) {
        block.set_parameters({in.begin() + 1, in.end()});
        block.reseed(42);
        return block(in[0]);
      },
      inputs, GradCheckOptions{.eps = 1e-6, .rtol = 1e-4, .atol = 1e-6});
  INFO(block.type_name(), ": ", r.report);
  CHECK(r.ok);
}
}  // namespace

TEST_CASE("gradcheck Conv2d with bias, strided and grouped") {
  Conv2d conv(Conv2dSpec{.in_channels = 4, .out_channels = 6, .kernel = 3, .stride = 2, .padding = 1, .groups = 2,
                         .bias = true});
  check_module_gradients(conv, {2, 5, 5, 4});
}

TEST_CASE("gradcheck BatchNorm2d in training mode") {
  BatchNorm2d bn(3);
  check_module_gradients(bn, {2, 3, 3, 3});
}

TEST_CASE("gradcheck Linear") {
  Linear fc(5, 3);
  check_module_gradients(fc, {4, 5});
}

TEST_CASE("gradcheck Sequential conv-BN-ReLU-maxpool (fused BN + ReLU), avgpool, flatten, dropout, linear") {
  Sequential net;
  net.push_back(std::make_unique<Conv2d>(3, 4, 3));
  net.push_back(std::make_unique<BatchNorm2d>(4));
  net.push_back(std::make_unique<Activation>(ActivationKind::relu));
  net.push_back(std::make_unique<MaxPool2d>(2));
  net.push_back(std::make_unique<AdaptiveAvgPool2d>(1, 1));
  net.push_back(std::make_unique<Flatten>());
  net.push_back(std::make_unique<Dropout>(0.3));
  net.push_back(std::make_unique<Linear>(4, 3));
  check_module_gradients(net, {2, 4, 4, 3});
}

TEST_CASE("gradcheck SqueezeExcitation") {
  SqueezeExcitation se(6, 2);
  check_module_gradients(se, {2, 3, 3, 6});
}

TEST_CASE("gradcheck BasicBlock, identity shortcut") {
  BasicBlock block(ResidualSpec{.in_channels = 3, .planes = 3});
  check_module_gradients(block, {2, 4, 4, 3});
}

TEST_CASE("gradcheck BasicBlock, projection shortcut (stride 2)") {
  BasicBlock block(ResidualSpec{.in_channels = 2, .planes = 4, .stride = 2});
  check_module_gradients(block, {2, 4, 4, 2});
}

TEST_CASE("gradcheck BasicBlock, zero-padding shortcut (CIFAR option A)") {
  BasicBlock block(ResidualSpec{.in_channels = 2, .planes = 4, .stride = 2, .shortcut = Shortcut::zero_pad});
  check_module_gradients(block, {2, 4, 4, 2});
}

TEST_CASE("gradcheck Bottleneck with downsample") {
  Bottleneck block(ResidualSpec{.in_channels = 4, .planes = 2, .stride = 2});
  check_module_gradients(block, {2, 4, 4, 4});
}

TEST_CASE("gradcheck MBConv without expansion (depthwise, SE, projection)") {
  MBConv block(MBConvSpec{.expand_ratio = 1, .kernel = 3, .stride = 2, .in_channels = 4, .out_channels = 3});
  check_module_gradients(block, {2, 4, 4, 4});
}

TEST_CASE("gradcheck MBConv with expansion, residual and stochastic depth") {
  MBConv block(MBConvSpec{
      .expand_ratio = 2, .kernel = 3, .stride = 1, .in_channels = 4, .out_channels = 4, .stochastic_depth = 0.5});
  check_module_gradients(block, {4, 3, 3, 4});
}
