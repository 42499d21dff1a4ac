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
#include "train/loss_scaler.h"

namespace cnn::train {

class RunLog;


class DivergenceGuard {
 public:
  static constexpr int64_t kMaxSkippedInARow = 20;

  // `loss_scaling`: fp16 (the warnings name the loss scale).
  DivergenceGuard(RunLog& log, std::filesystem::path last_checkpoint, bool loss_scaling);

  // What the loss scaler's control block says after step `step` (0-based): warns about the steps
  // skipped since the last record, and is a cnn::Error once kMaxSkippedInARow were skipped in a
  // row. The trainer records after every step on the CPU, where reading costs nothing, and at
  // logged steps, step checkpoints and epoch ends on a GPU, where it is a synchronisation.
  void record(int64_t step, const ScalerReadout& readout);
  // Where a resumed run starts: the skipped steps its checkpoint counted are not news.
  void resume_from(const ScalerReadout& readout) { reported_skipped_ = readout.skipped_steps; }
  // A cnn::Error when the mean training loss is not finite.
  void check_loss(double mean_loss, int64_t step, int64_t epoch) const;
  // A cnn::Error when the model's parameters hold inf/nan (before every save).
  void check_weights(const Module& model, int64_t step) const;

  int64_t skipped_steps() const { return reported_skipped_; }

 private:
  RunLog& log_;
  std::filesystem::path last_checkpoint_;
  bool loss_scaling_;
  int64_t reported_skipped_ = 0;  // the control block's count at the last record
  int64_t last_recorded_step_ = -1;
};

}  // namespace cnn::train
