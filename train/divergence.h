// The one inf/nan policy of training, the same in fp32, bf16 and fp16 (docs/train.md, "When the
// numbers stop being finite"):
//   - every optimizer step measures its gradients (the fused unscale-and-measure pass; the loss
//     scale is 1 outside fp16). A step whose gradients hold inf/nan is skipped: the weights and the
//     optimizer state stay as they were; it is counted and warned about, and fp16's dynamic loss
//     scaler lowers the scale. 20 skipped steps in a row stop the run.
//   - the mean training loss is checked at logged steps, before every step checkpoint and at the end
//     of each epoch: a loss that is not finite stops the run (the forward pass itself overflowed,
//     which skipping cannot repair).
//   - the weights are checked before every save: a checkpoint never holds inf/nan.
// Every stop is a cnn::Error that names the last good checkpoint.
#pragma once
#include <cstdint>
#include <filesystem>

#include "layers/module.h"

namespace cnn::train {

class RunLog;

// What an optimizer step did (train_step.h).
struct StepOutcome {
  int64_t step = 0;           // the step's number (0-based)
  bool applied = true;        // false: inf/nan gradients, skipped
  double loss_scale = 1;      // the scale the step's backward ran at
  double next_loss_scale = 1;  // the scale after the step (lowered after a skipped fp16 step)
};

class DivergenceGuard {
 public:
  static constexpr int64_t kMaxSkippedInARow = 20;

  // `loss_scaling`: fp16 (the warnings name the loss scale).
  DivergenceGuard(RunLog& log, std::filesystem::path last_checkpoint, bool loss_scaling);

  // After every optimizer step: counts and warns about a skipped step; a cnn::Error after
  // kMaxSkippedInARow skipped steps in a row.
  void record(const StepOutcome& outcome);
  // A cnn::Error when the mean training loss is not finite.
  void check_loss(double mean_loss, int64_t step, int64_t epoch) const;
  // A cnn::Error when the model's parameters hold inf/nan (before every save).
  void check_weights(const Module& model, int64_t step) const;

  int64_t skipped_steps() const { return skipped_; }

 private:
  RunLog& log_;
  std::filesystem::path last_checkpoint_;
  bool loss_scaling_;
  int64_t skipped_ = 0, skipped_in_a_row_ = 0;
};

}  // namespace cnn::train
