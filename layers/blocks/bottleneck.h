// ResNet's Bottleneck, torchvision's v1.5 (the stride on the 3x3): conv1 (1x1) -> bn1 -> relu ->
// conv2 (3x3, stride, groups) -> bn2 -> relu -> conv3 (1x1, 4 * planes) -> bn3, plus the shortcut,
// then relu. Width = planes * base_width / 64 * groups (ResNeXt and wide ResNets vary it).
#pragma once
#include "layers/activation.h"
#include "layers/batch_norm.h"
#include "layers/blocks/residual_block.h"
#include "layers/conv2d.h"

namespace cnn {

class Bottleneck : public ResidualBlock {
 public:
  static constexpr int kExpansion = 4;
  explicit Bottleneck(const ResidualSpec& spec, int groups = 1, int base_width = 64);

 protected:
  Tensor compute(const Tensor& x) override;

 private:
  Conv2d* conv1_;
  BatchNorm2d* bn1_;
  Conv2d* conv2_;
  BatchNorm2d* bn2_;
  Conv2d* conv3_;
  BatchNorm2d* bn3_;
  Activation* relu_;
};

}  // namespace cnn
