// Bottleneck (see bottleneck.h).
#include "layers/blocks/bottleneck.h"

namespace cnn {

Bottleneck::Bottleneck(const ResidualSpec& spec, int groups, int base_width)
    : ResidualBlock("Bottleneck", spec, spec.planes * kExpansion) {
  const int width = spec.planes * base_width / 64 * groups;
  const NormSpec& n = spec.norm;
  conv1_ = add_module("conv1", std::make_unique<Conv2d>(spec.in_channels, width, 1));
  bn1_ = add_module("bn1", std::make_unique<BatchNorm2d>(width, n.eps, n.momentum));
  conv2_ = add_module("conv2", std::make_unique<Conv2d>(width, width, 3, spec.stride, groups));
  bn2_ = add_module("bn2", std::make_unique<BatchNorm2d>(width, n.eps, n.momentum));
  conv3_ = add_module("conv3", std::make_unique<Conv2d>(width, out_channels(), 1));
  bn3_ = add_module("bn3", std::make_unique<BatchNorm2d>(out_channels(), n.eps, n.momentum));
  relu_ = add_module("relu", std::make_unique<Activation>(ActivationKind::relu));
  if (spec.zero_init_residual) bn3_->zero_init_weight();
  add_shortcut();
}

Tensor Bottleneck::compute(const Tensor& x) {
  return run_block(x, [this](const Tensor& in) {
    Tensor h = bn1_->forward_conv_fused(*conv1_, in, BatchNormActivation::relu);
    h = bn2_->forward_conv_fused(*conv2_, h, BatchNormActivation::relu);
    return merge(*bn3_, *conv3_, h, in);
  });
}

}  // namespace cnn
