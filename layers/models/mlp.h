// A multilayer perceptron for small images (28x28 by default): flatten, "classifier" = Linear ->
// ReLU -> Linear. No batch norm and no dropout, so a batch's gradient is exactly the mean of its
// parts' gradients: the model that gradient-accumulation tests and quick baselines use.
#pragma once
#include <memory>

#include "layers/sequential.h"

namespace cnn {

std::unique_ptr<Sequential> mlp(int num_classes, int in_channels, int image_size = 28, int hidden = 256);

}  // namespace cnn
