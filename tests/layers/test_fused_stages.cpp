// A Sequential of BatchNorm2d, ReLU and MaxPool2d (compact_cnn's and VGG's stages, ResNet's stem)
// runs them as one batch_norm_relu_max_pool2d call, with the results of the three modules.
#include <doctest/doctest.h>

#include <cstring>

#include "engine/cnn.h"
#include "engine/profiler.h"
#include "layers/activation.h"
#include "layers/batch_norm.h"
#include "layers/pool.h"
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
