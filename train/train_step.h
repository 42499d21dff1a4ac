// The training step: forward, loss and backward of each micro-batch, then (after the step's last
// micro-batch) unscale and measure the gradients, skip or clip, and the optimizer update. See the
// fenced section of train_step.cpp; the inf/nan policy is divergence.h's.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "engine/tensor.h"
#include "train/divergence.h"

namespace cnn::train {

struct Learner;
struct TrainSettings;
class DataParallel;
class GradientReducer;

// One micro-batch on the training device, ready for the model.
struct MicroBatch {
  Tensor images;      // [n, H, W, C] of the compute dtype
  Tensor labels;      // [n] i64
  int64_t epoch = 0;  // 0-based
  int64_t index = 0;  // 1-based place of the batch in its epoch (keys dropout masks and mixing)
  // Data-parallel runs: set on the last micro-batch of a step, whose backward all-reduces the
  // gradients as they become final (the others accumulate locally: DDP's no_sync).
  GradientReducer* reducer = nullptr;
  // A captured step (train/step_graph.h): the masks' seed as one i64 on the device, written before
  // each replay (undefined: masks_seed() of epoch and index, on the host).
  Tensor masks_seed_on_device = Tensor();
};

// The seed of a micro-batch's dropout and drop-path masks, keyed by (run seed, epoch, index), so
// that a resumed run draws what the batch would have; each rank of a data-parallel run its own.
uint64_t masks_seed(const TrainSettings& settings, int64_t epoch, int64_t index);

// Called once per optimizer step between the last backward and the unscaling, with the final,
// still loss-scaled gradients: where distributed training all-reduces them (and where tests inject
// inf/nan). May change the gradients in place. (With accumulation, the backward passes of a step's
// earlier micro-batches are the ones a distributed run makes without communication, as no_sync.)
using GradientHook = std::function<void(int64_t step, const std::vector<Tensor>& gradients)>;

// Forward, loss and backward of one micro-batch: its gradients (of the loss times the loss scale,
// divided by train.accumulate) add into the parameters' .grad. Returns the loss, detached.
Tensor forward_backward(Learner& learner, const MicroBatch& batch, const TrainSettings& settings);

// Optimizer step `step` over the gradients the micro-batches left: the averaged gradients of a
// data-parallel run, the hook, the fused unscale and measure pass (its measurements shared by every
// rank), then the update (clipped to optim.clip_grad_norm, by the norm of the averaged gradients)
// unless the gradients hold inf/nan; the gradients are zeroed either way. The verdict is made and
// obeyed on the device (train/loss_scaler.h): nothing here waits for it. learner.scaler.read()
// tells what happened.
// With group_lrs (f32, one per parameter group, on the device), the update reads its learning rates
// there instead of the schedule's lr(step) on the host: a captured step (train/step_graph.h).
void optimizer_step(Learner& learner, int64_t step, double clip_grad_norm, const GradientHook& on_gradients,
                    DataParallel& data_parallel, const Tensor& group_lrs = Tensor());

}  // namespace cnn::train
