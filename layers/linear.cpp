// Linear (see linear.h).
#include "layers/linear.h"

#include "engine/ops.h"
#include "layers/shape_trace.h"

namespace cnn {

Linear::Linear(int in_features, int out_features, bool bias)
    : Module("Linear"), in_(in_features), out_(out_features), has_bias_(bias) {
  CNN_CHECK(in_features > 0 && out_features > 0, "Linear(", in_features, ", ", out_features,
            "): feature counts must be positive");
  weight_ = add_parameter("weight", {out_features, in_features}, ParamRole::linear_weight,
                          ParamInit::pytorch_default(in_features));
  if (bias) bias_ = add_parameter("bias", {out_features}, ParamRole::bias, ParamInit::pytorch_default(in_features));
}

void Linear::set_init(ParamInit weight, ParamInit bias) {
  set_parameter_init(weight_, weight);
  if (has_bias_) set_parameter_init(bias_, bias);
}

Tensor Linear::compute(const Tensor& x) {
  return linear(x, parameter_as(weight_, x), has_bias_ ? parameter_as(bias_, x) : Tensor());
}

Shape Linear::infer_shape(const Shape& input, ShapeTrace& trace) const {
  CNN_CHECK(input.rank() >= 1 && input[input.rank() - 1] == in_, trace.where(), ": expects input [..., ", in_,
            "], got ", input.str());
  Shape output = input;
  output[input.rank() - 1] = out_;
  trace.add_macs(input.numel() * out_);
  return output;
}

}  // namespace cnn
