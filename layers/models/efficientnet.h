// torchvision's EfficientNet-B0..B7: "features" (stem Conv2dNormActivation, seven stages of MBConv
// blocks, the 1x1 head conv to 4x the last width), avgpool, flatten, and "classifier" (Dropout, Linear).
// Per variant as torchvision: width and depth multipliers (channels rounded to multiples of 8,
// layer counts rounded up), dropout before the classifier, stochastic depth rising linearly from 0
// to 0.2 over the blocks, and the BatchNorm settings (eps 1e-5, momentum 0.1 for B0-B4; eps 1e-3,
// momentum 0.01 for B5-B7, whose torchvision weights were ported from TensorFlow).
#pragma once
#include <memory>

#include "layers/blocks/conv_norm_activation.h"
#include "layers/sequential.h"

namespace cnn {

struct EfficientNetVariant {
  double width_mult;
  double depth_mult;
  double dropout;
  NormSpec norm;
};

// The settings of EfficientNet-B<index>, index 0..7.
EfficientNetVariant efficientnet_variant(int index);

std::unique_ptr<Sequential> efficientnet(const EfficientNetVariant& variant, int num_classes, int in_channels,
                                         double stochastic_depth = 0.2);

}  // namespace cnn
