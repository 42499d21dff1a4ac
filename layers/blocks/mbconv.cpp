// MBConv (see mbconv.h).
#include "layers/blocks/mbconv.h"

#include <algorithm>

#include "engine/ops.h"
#include "layers/blocks/squeeze_excitation.h"
#include "layers/shape_trace.h"

namespace cnn {

int make_divisible(double value, int divisor) {
  int rounded = std::max(divisor, static_cast<int>(value + divisor / 2.0) / divisor * divisor);
  if (rounded < 0.9 * value) rounded += divisor;
  return rounded;
}

MBConv::MBConv(const MBConvSpec& spec)
    : Module("MBConv"), spec_(spec), residual_(spec.stride == 1 && spec.in_channels == spec.out_channels) {
  CNN_CHECK(spec.stride == 1 || spec.stride == 2, "MBConv(in ", spec.in_channels, ", out ", spec.out_channels,
            "): stride must be 1 or 2, got ", spec.stride);
  CNN_CHECK(spec.in_channels > 0 && spec.out_channels > 0 && spec.expand_ratio >= 1.0, "MBConv(in ",
            spec.in_channels, ", out ", spec.out_channels, ", expand ", spec.expand_ratio,
            "): channels must be positive and the expand ratio at least 1");
  allow_gradient_checkpointing();
  const int expanded = make_divisible(spec.in_channels * spec.expand_ratio);
  auto block = std::make_unique<Sequential>();
  if (expanded != spec.in_channels)
    block->push_back(conv_norm_activation({.in_channels = spec.in_channels,
                                           .out_channels = expanded,
                                           .kernel = 1,
                                           .norm = spec.norm,
                                           .activation = ActivationKind::silu}));
  block->push_back(conv_norm_activation({.in_channels = expanded,
                                         .out_channels = expanded,
                                         .kernel = spec.kernel,
                                         .stride = spec.stride,
                                         .groups = expanded,
                                         .norm = spec.norm,
                                         .activation = ActivationKind::silu}));
  block->push_back(std::make_unique<SqueezeExcitation>(expanded, std::max(1, spec.in_channels / 4)));
  block->push_back(conv_norm_activation({.in_channels = expanded,
                                         .out_channels = spec.out_channels,
                                         .kernel = 1,
                                         .norm = spec.norm,
                                         .activation = std::nullopt}));
  block_ = add_module("block", std::move(block));
  stochastic_depth_ = add_module("stochastic_depth", std::make_unique<StochasticDepth>(spec.stochastic_depth));
}

Tensor MBConv::compute(const Tensor& x) {
  return run_block(x, [this](const Tensor& in) {
    const Tensor y = (*block_)(in);
    return residual_ ? add((*stochastic_depth_)(y), in) : y;
  });
}

Shape MBConv::infer_shape(const Shape& input, ShapeTrace& trace) const {
  const Shape s = trace.run(*block_, "block", input);
  trace.run(*stochastic_depth_, "stochastic_depth", s);
  return s;
}

}  // namespace cnn
