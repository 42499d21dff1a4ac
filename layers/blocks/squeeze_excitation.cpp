// SqueezeExcitation (see squeeze_excitation.h).
#include "layers/blocks/squeeze_excitation.h"

#include "engine/ops.h"
#include "layers/shape_trace.h"

namespace cnn {

SqueezeExcitation::SqueezeExcitation(int channels, int squeeze_channels, ActivationKind activation)
    : Module("SqueezeExcitation") {
  avgpool_ = add_module("avgpool", std::make_unique<AdaptiveAvgPool2d>(1, 1));
  fc1_ = add_module("fc1", std::make_unique<Conv2d>(channels, squeeze_channels, 1, 1, 1, /*bias=*/true));
  fc2_ = add_module("fc2", std::make_unique<Conv2d>(squeeze_channels, channels, 1, 1, 1, /*bias=*/true));
  activation_ = add_module("activation", std::make_unique<Activation>(activation));
  scale_activation_ = add_module("scale_activation", std::make_unique<Activation>(ActivationKind::sigmoid));
}

Tensor SqueezeExcitation::compute(const Tensor& x) {
  const Tensor scale = (*scale_activation_)((*fc2_)((*activation_)((*fc1_)((*avgpool_)(x)))));
  return mul(x, scale);
}

Shape SqueezeExcitation::infer_shape(const Shape& input, ShapeTrace& trace) const {
  Shape s = trace.run(*avgpool_, "avgpool", input);
  s = trace.run(*fc1_, "fc1", s);
  s = trace.run(*activation_, "activation", s);
  s = trace.run(*fc2_, "fc2", s);
  trace.run(*scale_activation_, "scale_activation", s);
  return input;
}

}  // namespace cnn
