// The multilayer perceptron (see mlp.h).
#include "layers/models/mlp.h"

#include "layers/activation.h"
#include "layers/linear.h"
#include "layers/pool.h"

namespace cnn {

std::unique_ptr<Sequential> mlp(int num_classes, int in_channels, int image_size, int hidden) {
  auto classifier = std::make_unique<Sequential>();
  classifier->push_back(std::make_unique<Linear>(in_channels * image_size * image_size, hidden));
  classifier->push_back(std::make_unique<Activation>(ActivationKind::relu));
  classifier->push_back(std::make_unique<Linear>(hidden, num_classes));
  auto net = std::make_unique<Sequential>("MLP");
  net->add("flatten", std::make_unique<Flatten>());
  net->add("classifier", std::move(classifier))->mark_as_head();
  return net;
}

}  // namespace cnn
