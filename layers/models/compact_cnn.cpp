// The compact CNN (see compact_cnn.h).
#include "layers/models/compact_cnn.h"

#include "layers/activation.h"
#include "layers/batch_norm.h"
#include "layers/conv2d.h"
#include "layers/dropout.h"
#include "layers/linear.h"
#include "layers/models/pooled_head.h"
#include "layers/pool.h"

namespace cnn {

std::unique_ptr<Sequential> compact_cnn(int num_classes, int in_channels, double dropout) {
  constexpr int kWidth1 = 32, kWidth2 = 64, kHidden = 128;
  auto features = std::make_unique<Sequential>();
  for (const auto& [in, out] : {std::pair{in_channels, kWidth1}, std::pair{kWidth1, kWidth2}}) {
    features->push_back(std::make_unique<Conv2d>(in, out, 3));
    features->push_back(std::make_unique<BatchNorm2d>(out));
    features->push_back(std::make_unique<Activation>(ActivationKind::relu));
    features->push_back(std::make_unique<MaxPool2d>(2));
  }
  auto classifier = std::make_unique<Sequential>();
  classifier->push_back(std::make_unique<Linear>(kWidth2 * 7 * 7, kHidden));
  classifier->push_back(std::make_unique<Activation>(ActivationKind::relu));
  classifier->push_back(std::make_unique<Dropout>(dropout));
  classifier->push_back(std::make_unique<Linear>(kHidden, num_classes));

  auto net = std::make_unique<Sequential>("CompactCNN");
  net->add("features", std::move(features));
  add_pooled_head(*net, 7, "classifier", std::move(classifier));
  return net;
}

}  // namespace cnn
