// SqueezeExcitation as torchvision's: global average pool ("avgpool") -> 1x1 conv reduce ("fc1",
// with bias) -> activation (SiLU in EfficientNet) -> 1x1 conv expand ("fc2") -> sigmoid -> scale the
// input's channels, a multiply of [N,1,1,C] with [N,H,W,C].
#pragma once
#include "layers/activation.h"
#include "layers/conv2d.h"
#include "layers/module.h"
#include "layers/pool.h"

namespace cnn {

class SqueezeExcitation : public Module {
 public:
  SqueezeExcitation(int channels, int squeeze_channels, ActivationKind activation = ActivationKind::silu);
  Shape infer_shape(const Shape& input, ShapeTrace& trace) const override;

 protected:
  Tensor compute(const Tensor& x) override;

 private:
  AdaptiveAvgPool2d* avgpool_;
  Conv2d* fc1_;
  Conv2d* fc2_;
  Activation* activation_;
  Activation* scale_activation_;
};

}  // namespace cnn
