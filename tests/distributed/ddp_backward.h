// For the data-parallel tests: the forward pass, cross-entropy loss and backward of one batch, its
// gradients adding into the parameters' .grad, and all-reduced by `reducer` when one is given (the
// step's last micro-batch; the others pass null: no_sync).
#pragma once
#include "engine/cnn.h"
#include "layers/module.h"
#include "train/distributed/gradient_reducer.h"

namespace cnn::testing {

inline void ddp_backward(Module& model, const Tensor& images, const Tensor& labels, train::GradientReducer* reducer,
                         double loss_factor = 1.0) {
  Tape tape;
  if (reducer) reducer->attach(tape);
  Tensor loss;
  {
    Tape::Recording rec(tape);
    loss = scale(cross_entropy(model.forward(images), labels), loss_factor);
  }
  tape.backward(loss);
  if (reducer) reducer->finish();
}

}  // namespace cnn::testing
