// Linear: y = x W^T + b over the last axis, weight [out, in] and bias [out] (torchvision's names).
// Initialised as PyTorch's nn.Linear by default (U(-1/sqrt(in), 1/sqrt(in)) for both); models that
// initialise their classifier otherwise call set_init().
#pragma once
#include "layers/module.h"

namespace cnn {

class Linear : public Module {
 public:
  Linear(int in_features, int out_features, bool bias = true);

  void set_init(ParamInit weight, ParamInit bias);
  Shape infer_shape(const Shape& input, ShapeTrace& trace) const override;
  int in_features() const { return in_; }
  int out_features() const { return out_; }
  const Tensor& weight() const { return parameter(weight_); }

 protected:
  Tensor compute(const Tensor& x) override;

 private:
  int in_, out_;
  bool has_bias_;
  size_t weight_ = 0, bias_ = 0;
};

}  // namespace cnn
