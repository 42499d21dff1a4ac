// What ResNet's BasicBlock and Bottleneck share: the shortcut branch, the merge of the two branches
// (fused last BN + add + ReLU; stochastic depth on the main branch when enabled) and gradient
// checkpointing.
// A block whose output shape differs from its input's maps the input through a "downsample"
// projection (1x1 conv with the block's stride, then BatchNorm: torchvision's ResNets), or through
// the parameter-free "option A" shortcut of the CIFAR ResNets (subsample by the stride, zero-pad
// the new channels half on each side).
#pragma once
#include <string>

#include "layers/batch_norm.h"
#include "layers/blocks/conv_norm_activation.h"
#include "layers/dropout.h"
#include "layers/module.h"
#include "layers/sequential.h"

namespace cnn {

enum class Shortcut { projection, zero_pad };

struct ResidualSpec {
  int in_channels = 0;
  int planes = 0;  // the block's width; BasicBlock outputs planes channels, Bottleneck 4 * planes
  int stride = 1;  // on the first 3x3 (BasicBlock) or on the 3x3 (Bottleneck, ResNet v1.5)
  NormSpec norm{};
  Shortcut shortcut = Shortcut::projection;
  bool zero_init_residual = false;  // the last BN's scale starts at 0, so the block starts as the identity
  double drop_path = 0;             // probability of dropping the main branch per sample while training
};

class ResidualBlock : public Module {
 public:
  int in_channels() const { return in_channels_; }
  int out_channels() const { return out_channels_; }
  // The main branch is every child but "downsample", in registration order; then the shortcut.
  Shape infer_shape(const Shape& input, ShapeTrace& trace) const final;

 protected:
  ResidualBlock(std::string type_name, const ResidualSpec& spec, int out_channels);
  // Registers "drop_path" when stochastic depth is on, and "downsample" when the block changes the
  // shape and the shortcut is a projection; called last in the derived constructor (torchvision
  // registers the projection after the main branch).
  void add_shortcut();
  Tensor shortcut(const Tensor& x);
  // relu(drop_path(last_bn(last_conv(h))) + shortcut(block_input)). Without stochastic depth (or in
  // eval mode) the BN, the add and the ReLU run as one fused op; in eval mode, where the engine
  // folds them into the convolution (BatchNorm2d::forward_conv_fused), with it.
  Tensor merge(BatchNorm2d& last_bn, Conv2d& last_conv, const Tensor& h, const Tensor& block_input);

  ResidualSpec spec_;
  int in_channels_;
  int out_channels_;

 private:
  bool changes_shape() const { return spec_.stride != 1 || in_channels_ != out_channels_; }
  Sequential* downsample_ = nullptr;
  StochasticDepth* drop_path_ = nullptr;
};

}  // namespace cnn
