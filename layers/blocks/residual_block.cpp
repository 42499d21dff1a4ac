// The shortcut branch of residual blocks (see residual_block.h).
#include "layers/blocks/residual_block.h"

#include "engine/ops.h"
#include "layers/batch_norm.h"
#include "layers/conv2d.h"
#include "layers/shape_trace.h"

namespace cnn {

ResidualBlock::ResidualBlock(std::string type_name, const ResidualSpec& spec, int out_channels)
    : Module(std::move(type_name)), spec_(spec), in_channels_(spec.in_channels), out_channels_(out_channels) {
  CNN_CHECK(spec.in_channels > 0 && spec.planes > 0 && spec.stride > 0, this->type_name(), "(in ", spec.in_channels,
            ", planes ", spec.planes, ", stride ", spec.stride, "): channels and stride must be positive");
  CNN_CHECK(spec.shortcut != Shortcut::zero_pad || out_channels >= spec.in_channels, this->type_name(),
            ": a zero-padding shortcut cannot reduce ", spec.in_channels, " channels to ", out_channels,
            "; use a projection shortcut");
  allow_gradient_checkpointing();
}

void ResidualBlock::add_shortcut() {
  CNN_CHECK(spec_.drop_path >= 0 && spec_.drop_path < 1, type_name(), ": drop_path must lie in [0, 1), got ",
            spec_.drop_path);
  if (spec_.drop_path > 0) drop_path_ = add_module("drop_path", std::make_unique<StochasticDepth>(spec_.drop_path));
  if (!changes_shape() || spec_.shortcut != Shortcut::projection) return;
  auto projection = std::make_unique<Sequential>();
  projection->push_back(std::make_unique<Conv2d>(Conv2dSpec{.in_channels = in_channels_,
                                                            .out_channels = out_channels_,
                                                            .kernel = 1,
                                                            .stride = spec_.stride}));
  projection->push_back(std::make_unique<BatchNorm2d>(out_channels_, spec_.norm.eps, spec_.norm.momentum));
  downsample_ = add_module("downsample", std::move(projection));
}

Tensor ResidualBlock::shortcut(const Tensor& x) {
  if (!changes_shape()) return x;
  if (downsample_ != nullptr) return (*downsample_)(x);
  // Option A: keep every stride-th pixel (a 1x1 max pool), zero-pad the new channels.
  Pool2dOptions subsample;
  subsample.kernel_h = subsample.kernel_w = 1;
  subsample.stride_h = subsample.stride_w = spec_.stride;
  const Tensor kept = spec_.stride == 1 ? x : max_pool2d(x, subsample);
  const int64_t before = (out_channels_ - in_channels_) / 2;
  const int64_t after = out_channels_ - in_channels_ - before;
  const Shape& s = kept.shape();
  return concat_channels({Tensor::zeros({s[0], s[1], s[2], before}, x.dtype(), x.device()), kept,
                          Tensor::zeros({s[0], s[1], s[2], after}, x.dtype(), x.device())});
}

Tensor ResidualBlock::merge(BatchNorm2d& last_bn, Conv2d& last_conv, const Tensor& h, const Tensor& block_input) {
  if (!training())
    return last_bn.forward_conv_fused(last_conv, h, BatchNormActivation::add_relu, shortcut(block_input));
  // The convolution before the shortcut, so that the tape (and the order in which the backward adds
  // the two branches' gradients of block_input) stays as it has always been.
  const Tensor branch = last_conv(h);
  if (drop_path_ == nullptr) return last_bn.forward_fused(branch, BatchNormActivation::add_relu, shortcut(block_input));
  const Tensor kept = (*drop_path_)(last_bn.forward_fused(branch, BatchNormActivation::none));
  return relu(add(kept, shortcut(block_input)));
}

Shape ResidualBlock::infer_shape(const Shape& input, ShapeTrace& trace) const {
  Shape main_branch = input;
  for (const Child& c : children())
    if (c.module.get() != downsample_) main_branch = trace.run(*c.module, c.name, main_branch);
  Shape identity = input;
  if (downsample_ != nullptr) {
    identity = trace.run(*downsample_, "downsample", input);
  } else if (changes_shape()) {
    identity = {input[0], window_output_size(input[1], 1, spec_.stride, 0, 1, false),
                window_output_size(input[2], 1, spec_.stride, 0, 1, false), out_channels_};
  }
  CNN_CHECK(identity == main_branch, trace.where(), ": the shortcut gives ", identity.str(), " but the main branch ",
            main_branch.str());
  return main_branch;
}

}  // namespace cnn
