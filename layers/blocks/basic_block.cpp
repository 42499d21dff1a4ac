// BasicBlock (see basic_block.h).
#include "layers/blocks/basic_block.h"

namespace cnn {

BasicBlock::BasicBlock(const ResidualSpec& spec) : ResidualBlock("BasicBlock", spec, spec.planes * kExpansion) {
  conv1_ = add_module("conv1", std::make_unique<Conv2d>(spec.in_channels, spec.planes, 3, spec.stride));
  bn1_ = add_module("bn1", std::make_unique<BatchNorm2d>(spec.planes, spec.norm.eps, spec.norm.momentum));
  relu_ = add_module("relu", std::make_unique<Activation>(ActivationKind::relu));
  conv2_ = add_module("conv2", std::make_unique<Conv2d>(spec.planes, spec.planes, 3));
  bn2_ = add_module("bn2", std::make_unique<BatchNorm2d>(spec.planes, spec.norm.eps, spec.norm.momentum));
  if (spec.zero_init_residual) bn2_->zero_init_weight();
  add_shortcut();
}

Tensor BasicBlock::compute(const Tensor& x) {
  return run_block(x, [this](const Tensor& in) {
    const Tensor h = bn1_->forward_conv_fused(*conv1_, in, BatchNormActivation::relu);
    return merge(*bn2_, *conv2_, h, in);
  });
}

}  // namespace cnn
