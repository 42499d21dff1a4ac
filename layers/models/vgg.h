// torchvision's VGGs (vgg11/13/16/19 and their _bn forms): "features" (3x3 convs with bias, ReLU,
// optional BatchNorm, 2x2 max pools), avgpool (adaptive, 7x7), flatten, and "classifier"
// (Linear-ReLU-Dropout twice, then Linear). Initialised as torchvision: Kaiming normal (fan_out)
// convs with zero bias, Linear weights N(0, 0.01) with zero bias.
#pragma once
#include <memory>

#include "layers/sequential.h"

namespace cnn {

// depth: 11, 13, 16 or 19; dropout: torchvision's default 0.5.
std::unique_ptr<Sequential> vgg(int depth, bool batch_norm, int num_classes, int in_channels, double dropout = 0.5);

}  // namespace cnn
