// Sequential: children run in order, as torch.nn.Sequential. push_back names them "0", "1", ... (so
// their parameters are "features.3.weight" and the like); add() gives a name, which is how the models
// are built (ResNet: conv1, bn1, relu, maxpool, layer1..layer4, avgpool, flatten, fc). A BatchNorm2d
// directly followed by a ReLU runs as one fused engine call, and with a MaxPool2d after the ReLU as
// one call of all three (batch_norm_relu_max_pool2d); in eval mode a Conv2d before the BatchNorm2d
// joins them (conv2d_batch_norm_relu_max_pool2d). The tree and the state_dict keep them all.
#pragma once
#include <memory>
#include <string>

#include "layers/module.h"

namespace cnn {

class Sequential : public Module {
 public:
  explicit Sequential(std::string type_name = "Sequential");

  template <class M>
  M* push_back(std::unique_ptr<M> module) {
    return add_module(std::to_string(children().size()), std::move(module));
  }
  template <class M>
  M* add(std::string name, std::unique_ptr<M> module) {
    return add_module(std::move(name), std::move(module));
  }
  size_t size() const { return children().size(); }
  Module& operator[](size_t i) const { return *children().at(i).module; }

  Shape infer_shape(const Shape& input, ShapeTrace& trace) const override;

 protected:
  Tensor compute(const Tensor& x) override;
};

}  // namespace cnn
