// The training step (see train_step.h).
#include "train/train_step.h"

#include "data/batch_augment.h"
#include "engine/cnn.h"
#include "engine/profiler.h"
#include "train/distributed/data_parallel.h"
#include "train/learner.h"
#include "train/optim/grad_norm.h"
#include "train/train_settings.h"

namespace cnn::train {

// ===================================== the training step =====================================
// Gradient accumulation is the tape's: the micro-batches of a step add into the same .grad.
// The profiler's phase spans (engine/profiler.h) mark forward (with the loss), backward, unscale
// (with the inf/nan check and the loss scaler's update) and the optimizer step.

uint64_t masks_seed(const TrainSettings& settings, int64_t epoch, int64_t index) {
  const uint64_t rank = static_cast<uint64_t>(settings.distributed.world.rank);
  const uint64_t batch_seed =
      derive_seed(derive_seed(settings.compute.seed, static_cast<uint64_t>(epoch)), static_cast<uint64_t>(index));
  return rank == 0 ? batch_seed : derive_seed(batch_seed, rank);
}

Tensor forward_backward(Learner& learner, const MicroBatch& batch, const TrainSettings& settings) {
  const LossSettings& loss_settings = settings.loss;
  const uint64_t seed = settings.compute.seed;
  const auto epoch = static_cast<uint64_t>(batch.epoch), index = static_cast<uint64_t>(batch.index);
  if (batch.masks_seed_on_device.defined())
    learner.model->reseed_on_device(batch.masks_seed_on_device);
  else
    learner.model->reseed(masks_seed(settings, batch.epoch, batch.index));
  Tensor images = batch.images;
  Tape tape;
  if (batch.reducer) batch.reducer->attach(tape);  // the step's last micro-batch: all-reduce during backward
  Tensor loss;
  const Device& device = settings.compute.device;
  {
    const profiler::Scope span("forward", profiler::Category::phase, device);
    Tape::Recording recording(tape);
    Tensor targets;  // MixUp/CutMix: the images are mixed in place, the targets are soft
    if (loss_settings.mixing)
      targets = data::mix_batch(images, batch.labels, settings.data.classes, loss_settings.mix, seed, epoch, index).targets;
    // The loss in f32 from f16/bf16/f32 logits; in f64 from f64 ones (cnn_forward --compute f64).
    const DType loss_dtype = accumulate_dtype(learner.model->compute_dtype());
    const Tensor logits = learner.model->forward(images).to(loss_dtype);  // forward
    loss = loss_settings.mixing ? cross_entropy_soft(logits, targets.to(loss_dtype))  // loss
                                : cross_entropy(logits, batch.labels, loss_settings.label_smoothing);
  }
  // The seed: the loss scale (on the device, never read here) over the micro-batches of the step.
  Tensor loss_gradient;
  {
    NoGrad no_grad;
    loss_gradient = settings.loop.accumulate == 1
                        ? learner.scaler.scale_tensor().clone()
                        : div(learner.scaler.scale_tensor(),
                              Tensor::full({}, static_cast<double>(settings.loop.accumulate), DType::f32, device));
    loss_gradient = loss_gradient.to(loss.dtype());  // f64 for an f64 loss; no copy otherwise
  }
  {
    const profiler::Scope span("backward", profiler::Category::phase, device);
    tape.backward(loss, loss_gradient);  // backward
  }
  return loss.detach();
}

void optimizer_step(Learner& learner, int64_t step, double clip_grad_norm, const GradientHook& on_gradients,
                    DataParallel& data_parallel, const Tensor& group_lrs) {
  data_parallel.finish_gradients();  // data-parallel: wait for the buckets, the averages into .grad
  const std::vector<Tensor> gradients = learner.optimizer->gradients();
  if (on_gradients) on_gradients(step, gradients);  // the gradients are final here
  // All on the device, nothing read back:
  const Device device = learner.model->device();
  {
    const profiler::Scope span("unscale", profiler::Category::phase, device);
    const Tensor measured = data_parallel.agree(learner.scaler.unscale(gradients));  // unscale, norm, inf/nan count
    learner.scaler.update(measured, clip_grad_norm);  // the verdict: skip on inf/nan (fp16: lower the scale), clip
  }
  {
    const profiler::Scope span("optimizer step", profiler::Category::phase, device);
    if (group_lrs.defined())
      learner.optimizer->step(group_lrs, 1.0, learner.scaler.control());  // gated by the verdict
    else
      learner.optimizer->step(learner.schedule.lr(step), 1.0, learner.scaler.control());
    learner.optimizer->zero_grad();
  }
}

// =============================================================================================

}  // namespace cnn::train
