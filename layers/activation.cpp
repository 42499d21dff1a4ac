// Activation modules (see activation.h).
#include "layers/activation.h"

#include "engine/ops.h"

namespace cnn {

namespace {
const char* activation_type_name(ActivationKind kind) {
  switch (kind) {
    case ActivationKind::relu: return "ReLU";
    case ActivationKind::silu: return "SiLU";
    case ActivationKind::sigmoid: return "Sigmoid";
  }
  return "?";
}
}  // namespace

Activation::Activation(ActivationKind kind) : Module(activation_type_name(kind)), kind_(kind) {}

Tensor apply_activation(ActivationKind kind, const Tensor& x) {
  switch (kind) {
    case ActivationKind::relu: return relu(x);
    case ActivationKind::silu: return silu(x);
    case ActivationKind::sigmoid: return sigmoid(x);
  }
  return x;
}

Tensor Activation::compute(const Tensor& x) { return apply_activation(kind_, x); }

Shape Activation::infer_shape(const Shape& input, ShapeTrace&) const { return input; }

}  // namespace cnn
