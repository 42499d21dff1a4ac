// Sequential (see sequential.h).
#include "layers/sequential.h"

#include "layers/activation.h"
#include "layers/batch_norm.h"
#include "layers/conv2d.h"
#include "layers/pool.h"
#include "layers/shape_trace.h"

namespace cnn {

Sequential::Sequential(std::string type_name) : Module(std::move(type_name)) {}

Tensor Sequential::compute(const Tensor& x) {
  Tensor y = x;
  for (size_t i = 0; i < size(); ++i) {
    if (auto* conv = dynamic_cast<Conv2d*>(&(*this)[i]); conv != nullptr && i + 3 < size()) {
      // A first stage in eval mode: conv, BatchNorm, ReLU and max-pool as one op.
      auto* norm = dynamic_cast<BatchNorm2d*>(&(*this)[i + 1]);
      auto* relu = dynamic_cast<Activation*>(&(*this)[i + 2]);
      auto* pool = dynamic_cast<MaxPool2d*>(&(*this)[i + 3]);
      if (norm != nullptr && !norm->training() && relu != nullptr && relu->kind() == ActivationKind::relu &&
          pool != nullptr) {
        y = norm->forward_conv_fused_max_pool(*conv, y, pool->options());
        i += 3;
        continue;
      }
    }
    if (auto* conv = dynamic_cast<Conv2d*>(&(*this)[i]); conv != nullptr && i + 1 < size()) {
      // conv and BatchNorm [and ReLU] in eval mode: the BatchNorm folded into the convolution.
      auto* norm = dynamic_cast<BatchNorm2d*>(&(*this)[i + 1]);
      auto* relu = i + 2 < size() ? dynamic_cast<Activation*>(&(*this)[i + 2]) : nullptr;
      const bool with_relu = relu != nullptr && relu->kind() == ActivationKind::relu;
      if (norm != nullptr && !norm->training()) {
        y = norm->forward_conv_fused(*conv, y, with_relu ? BatchNormActivation::relu : BatchNormActivation::none);
        i += with_relu ? 2 : 1;
        continue;
      }
    }
    auto* norm = dynamic_cast<BatchNorm2d*>(&(*this)[i]);
    auto* next = i + 1 < size() ? dynamic_cast<Activation*>(&(*this)[i + 1]) : nullptr;
    if (norm != nullptr && next != nullptr && next->kind() == ActivationKind::relu) {
      // (The pool's own forward would cast its input to the compute dtype, which the BatchNorm's
      // output already has.)
      auto* pool = i + 2 < size() ? dynamic_cast<MaxPool2d*>(&(*this)[i + 2]) : nullptr;
      if (pool != nullptr) {
        y = norm->forward_fused_max_pool(y, pool->options());
        i += 2;
        continue;
      }
      y = norm->forward_fused(y, BatchNormActivation::relu);
      ++i;
      continue;
    }
    y = (*this)[i](y);
  }
  return y;
}

Shape Sequential::infer_shape(const Shape& input, ShapeTrace& trace) const {
  Shape shape = input;
  for (const Child& c : children()) shape = trace.run(*c.module, c.name, shape);
  return shape;
}

}  // namespace cnn
