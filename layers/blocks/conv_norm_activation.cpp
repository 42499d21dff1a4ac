// Conv2dNormActivation as a Sequential (see conv_norm_activation.h).
#include "layers/blocks/conv_norm_activation.h"

#include "layers/conv2d.h"

namespace cnn {

std::unique_ptr<Sequential> conv_norm_activation(const ConvNormActivationSpec& spec) {
  auto seq = std::make_unique<Sequential>();
  seq->push_back(std::make_unique<Conv2d>(spec.in_channels, spec.out_channels, spec.kernel, spec.stride, spec.groups));
  seq->push_back(std::make_unique<BatchNorm2d>(spec.out_channels, spec.norm.eps, spec.norm.momentum));
  if (spec.activation) seq->push_back(std::make_unique<Activation>(*spec.activation));
  return seq;
}

}  // namespace cnn
