// VGG builders (see vgg.h).
#include "layers/models/vgg.h"

#include <vector>

#include "layers/activation.h"
#include "layers/batch_norm.h"
#include "layers/conv2d.h"
#include "layers/dropout.h"
#include "layers/linear.h"
#include "layers/models/pooled_head.h"
#include "layers/pool.h"

namespace cnn {

namespace {
constexpr int kPool = 0;  // a 2x2 max pool in a configuration

// torchvision's configurations "A" (11), "B" (13), "D" (16) and "E" (19): conv widths and pools.
std::vector<int> vgg_configuration(int depth) {
  switch (depth) {
    case 11: return {64, kPool, 128, kPool, 256, 256, kPool, 512, 512, kPool, 512, 512, kPool};
    case 13: return {64, 64, kPool, 128, 128, kPool, 256, 256, kPool, 512, 512, kPool, 512, 512, kPool};
    case 16:
      return {64, 64, kPool, 128, 128, kPool, 256, 256, 256, kPool, 512, 512, 512, kPool, 512, 512, 512, kPool};
    case 19:
      return {64,  64,  kPool, 128, 128, kPool, 256, 256, 256, 256, kPool,
              512, 512, 512,   512, kPool, 512, 512, 512, 512, kPool};
    default: break;
  }
  CNN_CHECK(false, "vgg: no VGG of depth ", depth, "; the depths are 11, 13, 16 and 19");
  return {};
}

std::unique_ptr<Linear> normal_linear(int in, int out) {
  auto layer = std::make_unique<Linear>(in, out);
  layer->set_init(ParamInit::normal(0.01), ParamInit::constant(0.0));
  return layer;
}
}  // namespace

std::unique_ptr<Sequential> vgg(int depth, bool batch_norm, int num_classes, int in_channels, double dropout) {
  auto features = std::make_unique<Sequential>();
  int channels = in_channels;
  for (int width : vgg_configuration(depth)) {
    if (width == kPool) {
      features->push_back(std::make_unique<MaxPool2d>(2, 2));
      continue;
    }
    features->push_back(std::make_unique<Conv2d>(channels, width, 3, 1, 1, /*bias=*/true));
    if (batch_norm) features->push_back(std::make_unique<BatchNorm2d>(width));
    features->push_back(std::make_unique<Activation>(ActivationKind::relu));
    channels = width;
  }
  constexpr int kHidden = 4096;
  auto classifier = std::make_unique<Sequential>();
  classifier->push_back(normal_linear(channels * 7 * 7, kHidden));
  classifier->push_back(std::make_unique<Activation>(ActivationKind::relu));
  classifier->push_back(std::make_unique<Dropout>(dropout));
  classifier->push_back(normal_linear(kHidden, kHidden));
  classifier->push_back(std::make_unique<Activation>(ActivationKind::relu));
  classifier->push_back(std::make_unique<Dropout>(dropout));
  classifier->push_back(normal_linear(kHidden, num_classes));

  auto net = std::make_unique<Sequential>("VGG");
  net->add("features", std::move(features));
  add_pooled_head(*net, 7, "classifier", std::move(classifier));
  return net;
}

}  // namespace cnn
