// EfficientNet's MBConv block, as torchvision's: "block" is a Sequential of
//   [expand: 1x1 Conv2dNormActivation with SiLU, only when expand_ratio != 1]
//   depthwise: k x k Conv2dNormActivation (groups = channels, the block's stride), SiLU
//   SqueezeExcitation(expanded, max(1, in / 4)) with SiLU
//   project: 1x1 Conv2dNormActivation without activation
// and, when stride is 1 and the channel count is kept, the residual: stochastic_depth(block(x)) + x.
#pragma once
#include "layers/blocks/conv_norm_activation.h"
#include "layers/dropout.h"
#include "layers/module.h"
#include "layers/sequential.h"

namespace cnn {

// torchvision's _make_divisible: round to the nearest multiple of `divisor` (at least `divisor`),
// never going below 90% of the value.
int make_divisible(double value, int divisor = 8);

struct MBConvSpec {
  double expand_ratio = 1.0;
  int kernel = 3;
  int stride = 1;
  int in_channels = 0;
  int out_channels = 0;
  double stochastic_depth = 0.0;  // drop probability of the residual branch
  NormSpec norm{};
};

class MBConv : public Module {
 public:
  explicit MBConv(const MBConvSpec& spec);
  Shape infer_shape(const Shape& input, ShapeTrace& trace) const override;
  const MBConvSpec& spec() const { return spec_; }
  bool has_residual() const { return residual_; }

 protected:
  Tensor compute(const Tensor& x) override;

 private:
  MBConvSpec spec_;
  bool residual_;
  Sequential* block_;
  StochasticDepth* stochastic_depth_;
};

}  // namespace cnn
