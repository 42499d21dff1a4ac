// BatchNorm statistics recomputed for a model's current weights, as torch.optim.swa_utils.update_bn:
// every BatchNorm2d's running statistics reset and switched to the cumulative average (PyTorch's
// momentum = None), one pass over the given batches in train mode without recording gradients, then
// the usual momentum back. The running mean and variance end up as the equal-weight averages of
// the batches' means and (unbiased) variances, num_batches_tracked as the number of batches. SWA
// needs this: its averaged weights never produced the running statistics it averaged.
#pragma once
#include <cstdint>
#include <functional>

#include "engine/tensor.h"
#include "layers/module.h"

namespace cnn::train {

// `next_images` gives the next batch of input images, or an undefined Tensor when there are no
// more. Returns the number of BatchNorm2d layers (0: the model has none, and no batch is read).
// The model is left in train mode.
int update_batch_norm(Module& model, const std::function<Tensor()>& next_images);

}  // namespace cnn::train
