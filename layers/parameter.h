// What the module tree says about each tensor it owns: a parameter's role (which decides, for
// example, whether weight decay applies), how it is initialised, and the named views that
// named_parameters(), named_buffers() and state_dict() return.
#pragma once
#include <cstdint>
#include <string>

#include "engine/tensor.h"
#include "kernels/common/philox.h"

namespace cnn {

// The kind of a parameter, for optimizer parameter groups: weight decay usually applies only to
// conv_weight and linear_weight; biases and normalisation affine terms are left undecayed.
enum class ParamRole : uint8_t { conv_weight, linear_weight, bias, norm_weight, norm_bias };

const char* param_role_name(ParamRole role);

// How initialize() draws a parameter (or resets a buffer). The draws come from Tensor::randn and
// Tensor::uniform with a seed derived from the model seed and the tensor's index in the model.
struct ParamInit {
  enum class Kind : uint8_t { constant, normal, uniform };
  Kind kind = Kind::constant;
  double value = 0.0;  // constant: the value; normal: the standard deviation; uniform: the bound b of U(-b, b)

  static ParamInit constant(double value) { return {Kind::constant, value}; }
  static ParamInit normal(double stddev) { return {Kind::normal, stddev}; }
  static ParamInit uniform(double bound) { return {Kind::uniform, bound}; }
  // He initialisation for a ReLU network, mode fan_out, as torch.nn.init.kaiming_normal_(mode="fan_out"):
  // std = sqrt(2 / (out_channels * kernel_h * kernel_w)).
  static ParamInit kaiming_normal_fan_out(int64_t out_channels, int64_t kernel_h, int64_t kernel_w);
  // PyTorch's default for Linear and Conv2d: U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for the bias, and the
  // same bound for the weight (kaiming_uniform_ with a = sqrt(5) reduces to it).
  static ParamInit pytorch_default(int64_t fan_in);

  // A new f32 CPU tensor of `shape` drawn with `seed`.
  Tensor draw(const Shape& shape, uint64_t seed, DType dtype = DType::f32) const;
};

// A parameter as the model exposes it. `tensor` is the leaf itself (requires_grad set unless frozen):
// optimizers keep it and read its .grad.
struct NamedParameter {
  std::string name;  // torchvision's dotted name, e.g. "layer1.0.conv1.weight"
  Tensor tensor;
  ParamRole role = ParamRole::conv_weight;
  bool in_head = false;  // part of the classifier head (fc / classifier), not of the backbone

  // Whether weight decay applies under the usual convention (not to biases or normalisation terms).
  bool decays() const { return role == ParamRole::conv_weight || role == ParamRole::linear_weight; }
};

// A buffer (running statistics, counters) or any named tensor of the state.
struct NamedTensor {
  std::string name;
  Tensor tensor;
};

// One entry of a state_dict: parameters and buffers in PyTorch's order (per module its own
// parameters, then its own buffers, then its children in registration order).
struct StateEntry {
  std::string name;
  Shape shape;    // known before initialize()
  Tensor tensor;  // undefined before initialize()
  bool is_parameter = true;
};

// derive_seed(seed, index): kernels/common/philox.h.

}  // namespace cnn
