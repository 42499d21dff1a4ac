// Conv2d: a 2-D convolution over NHWC activations with weight [out, kernel_h, kernel_w, in/groups]
// and an optional bias [out], torchvision's parameter names "weight" and "bias". Initialised as
// torchvision's classifiers do: Kaiming normal (fan_out) weight, zero bias.
#pragma once
#include "engine/ops.h"
#include "layers/module.h"

namespace cnn {

struct Conv2dSpec {
  int in_channels = 0;
  int out_channels = 0;
  int kernel = 3;  // square kernel
  int stride = 1;
  int padding = 0;
  int groups = 1;
  bool bias = false;
  int dilation = 1;
};

class Conv2d : public Module {
 public:
  explicit Conv2d(const Conv2dSpec& spec);
  // Shorthand for the common case; padding defaults to "same" for odd kernels at stride 1, (k-1)/2.
  Conv2d(int in_channels, int out_channels, int kernel, int stride = 1, int groups = 1, bool bias = false);

  Shape infer_shape(const Shape& input, ShapeTrace& trace) const override;
  const Conv2dSpec& spec() const { return spec_; }
  const Conv2dOptions& options() const { return options_; }
  const Tensor& weight() const { return parameter(weight_); }
  Tensor bias() const { return spec_.bias ? parameter(bias_) : Tensor(); }
  // The weight and bias as forward() computes with them for input x: in x's dtype (a kept
  // low-precision copy, or a cast).
  Tensor weight_for(const Tensor& x) const { return parameter_as(weight_, x); }
  Tensor bias_for(const Tensor& x) const { return spec_.bias ? parameter_as(bias_, x) : Tensor(); }

 protected:
  Tensor compute(const Tensor& x) override;

 private:
  Conv2dSpec spec_;
  Conv2dOptions options_;
  size_t weight_ = 0;
  size_t bias_ = 0;
};

}  // namespace cnn
