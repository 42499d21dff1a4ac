// Parameter roles, initialisers and seed derivation (see parameter.h).
#include "layers/parameter.h"

#include <cmath>

namespace cnn {

const char* param_role_name(ParamRole role) {
  switch (role) {
    case ParamRole::conv_weight: return "conv_weight";
    case ParamRole::linear_weight: return "linear_weight";
    case ParamRole::bias: return "bias";
    case ParamRole::norm_weight: return "norm_weight";
    case ParamRole::norm_bias: return "norm_bias";
  }
  return "?";
}

ParamInit ParamInit::kaiming_normal_fan_out(int64_t out_channels, int64_t kernel_h, int64_t kernel_w) {
  const double fan_out = static_cast<double>(out_channels * kernel_h * kernel_w);
  return normal(std::sqrt(2.0 / fan_out));
}

ParamInit ParamInit::pytorch_default(int64_t fan_in) { return uniform(1.0 / std::sqrt(static_cast<double>(fan_in))); }

Tensor ParamInit::draw(const Shape& shape, uint64_t seed, DType dtype) const {
  switch (kind) {
    case Kind::normal: return Tensor::randn(shape, seed, dtype, Device::cpu(), 0.0, value);
    case Kind::uniform: return Tensor::uniform(shape, -value, value, seed, dtype, Device::cpu());
    case Kind::constant: break;
  }
  return Tensor::full(shape, value, dtype, Device::cpu());
}

}  // namespace cnn
