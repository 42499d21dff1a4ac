// EfficientNet builders (see efficientnet.h).
#include "layers/models/efficientnet.h"

#include <array>
#include <cmath>

#include "layers/blocks/mbconv.h"
#include "layers/dropout.h"
#include "layers/linear.h"
#include "layers/models/pooled_head.h"

namespace cnn {

namespace {
// One stage of the B0 baseline: expand ratio, kernel, stride, input and output channels, layers.
struct StageConfig {
  double expand_ratio;
  int kernel, stride, in_channels, out_channels, layers;
};
constexpr std::array<StageConfig, 7> kBaseline{{{1, 3, 1, 32, 16, 1},
                                                {6, 3, 2, 16, 24, 2},
                                                {6, 5, 2, 24, 40, 2},
                                                {6, 3, 2, 40, 80, 3},
                                                {6, 5, 1, 80, 112, 3},
                                                {6, 5, 2, 112, 192, 4},
                                                {6, 3, 1, 192, 320, 1}}};
}  // namespace

EfficientNetVariant efficientnet_variant(int index) {
  const NormSpec torch_default{};
  const NormSpec ported{.eps = 1e-3, .momentum = 0.01};
  switch (index) {
    case 0: return {1.0, 1.0, 0.2, torch_default};
    case 1: return {1.0, 1.1, 0.2, torch_default};
    case 2: return {1.1, 1.2, 0.3, torch_default};
    case 3: return {1.2, 1.4, 0.3, torch_default};
    case 4: return {1.4, 1.8, 0.4, torch_default};
    case 5: return {1.6, 2.2, 0.4, ported};
    case 6: return {1.8, 2.6, 0.5, ported};
    case 7: return {2.0, 3.1, 0.5, ported};
    default: break;
  }
  CNN_CHECK(false, "efficientnet: no variant B", index, "; the variants are B0 to B7");
  return {};
}

std::unique_ptr<Sequential> efficientnet(const EfficientNetVariant& variant, int num_classes, int in_channels,
                                         double stochastic_depth) {
  const auto width = [&](int channels) { return make_divisible(channels * variant.width_mult); };
  const auto depth = [&](int layers) { return static_cast<int>(std::ceil(layers * variant.depth_mult)); };
  int total_blocks = 0;
  for (const StageConfig& stage : kBaseline) total_blocks += depth(stage.layers);

  auto features = std::make_unique<Sequential>();
  features->push_back(conv_norm_activation({.in_channels = in_channels,
                                            .out_channels = width(kBaseline[0].in_channels),
                                            .kernel = 3,
                                            .stride = 2,
                                            .norm = variant.norm,
                                            .activation = ActivationKind::silu}));
  int block_index = 0;
  for (const StageConfig& stage : kBaseline) {
    auto blocks = std::make_unique<Sequential>();
    for (int b = 0; b < depth(stage.layers); ++b) {
      blocks->push_back(std::make_unique<MBConv>(
          MBConvSpec{.expand_ratio = stage.expand_ratio,
                     .kernel = stage.kernel,
                     .stride = b == 0 ? stage.stride : 1,
                     .in_channels = b == 0 ? width(stage.in_channels) : width(stage.out_channels),
                     .out_channels = width(stage.out_channels),
                     .stochastic_depth = stochastic_depth * block_index++ / total_blocks,
                     .norm = variant.norm}));
    }
    features->push_back(std::move(blocks));
  }
  const int last_in = width(kBaseline.back().out_channels);
  const int last_out = 4 * last_in;
  features->push_back(conv_norm_activation({.in_channels = last_in,
                                            .out_channels = last_out,
                                            .kernel = 1,
                                            .norm = variant.norm,
                                            .activation = ActivationKind::silu}));

  auto classifier = std::make_unique<Sequential>();
  classifier->push_back(std::make_unique<Dropout>(variant.dropout));
  Linear* fc = classifier->push_back(std::make_unique<Linear>(last_out, num_classes));
  fc->set_init(ParamInit::uniform(1.0 / std::sqrt(static_cast<double>(num_classes))), ParamInit::constant(0.0));

  auto net = std::make_unique<Sequential>("EfficientNet");
  net->add("features", std::move(features));
  add_pooled_head(*net, 1, "classifier", std::move(classifier));
  return net;
}

}  // namespace cnn
