// ResNet's BasicBlock (torchvision names): conv1 (3x3, stride) -> bn1 -> relu -> conv2 (3x3) -> bn2,
// plus the shortcut, then relu. Output channels = planes. The second BN runs fused with the residual
// add and the ReLU.
#pragma once
#include "layers/activation.h"
#include "layers/batch_norm.h"
#include "layers/blocks/residual_block.h"
#include "layers/conv2d.h"

namespace cnn {

class BasicBlock : public ResidualBlock {
 public:
  static constexpr int kExpansion = 1;
  explicit BasicBlock(const ResidualSpec& spec);

 protected:
  Tensor compute(const Tensor& x) override;

 private:
  Conv2d* conv1_;
  BatchNorm2d* bn1_;
  Activation* relu_;
  Conv2d* conv2_;
  BatchNorm2d* bn2_;
};

}  // namespace cnn
