// torchvision's Conv2dNormActivation: a Sequential of a bias-free Conv2d ("0"), a BatchNorm2d ("1")
// and, optionally, an activation ("2"), with "same" padding (kernel - 1) / 2.
#pragma once
#include <memory>
#include <optional>

#include "layers/activation.h"
#include "layers/batch_norm.h"
#include "layers/sequential.h"

namespace cnn {

// BatchNorm settings of a model (torchvision's norm_layer): eps and momentum.
struct NormSpec {
  double eps = BatchNorm2d::kDefaultEps;
  double momentum = BatchNorm2d::kDefaultMomentum;
};

struct ConvNormActivationSpec {
  int in_channels = 0;
  int out_channels = 0;
  int kernel = 3;
  int stride = 1;
  int groups = 1;
  NormSpec norm{};
  std::optional<ActivationKind> activation = ActivationKind::relu;
};

std::unique_ptr<Sequential> conv_norm_activation(const ConvNormActivationSpec& spec);

}  // namespace cnn
