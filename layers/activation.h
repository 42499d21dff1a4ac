// Parameter-free elementwise activations as modules (ReLU, SiLU, Sigmoid), so that a Sequential can
// hold them as torchvision's does (they own no state, so they add nothing to the state_dict).
#pragma once
#include "layers/module.h"

namespace cnn {

enum class ActivationKind { relu, silu, sigmoid };

class Activation : public Module {
 public:
  explicit Activation(ActivationKind kind);
  ActivationKind kind() const { return kind_; }
  Shape infer_shape(const Shape& input, ShapeTrace& trace) const override;

 protected:
  Tensor compute(const Tensor& x) override;

 private:
  ActivationKind kind_;
};

// The activation function itself, for code that applies it without a module.
Tensor apply_activation(ActivationKind kind, const Tensor& x);

}  // namespace cnn
