// The inf/nan policy of training (see divergence.h).
#include "train/divergence.h"

#include <cmath>
#include <string>

#include "engine/error.h"
#include "train/optim/grad_norm.h"
#include "train/run_log.h"

namespace cnn::train {

namespace {
// Where to go back to, named only when the checkpoint exists (a run can diverge before its first).
std::string where_to_restart(const std::filesystem::path& last_checkpoint) {
  std::error_code ignored;
  if (!last_checkpoint.empty() && std::filesystem::is_regular_file(last_checkpoint, ignored))
    return "The last good checkpoint is " + last_checkpoint.string();
  return "No checkpoint was written yet";
}
}  // namespace

DivergenceGuard::DivergenceGuard(RunLog& log, std::filesystem::path last_checkpoint, bool loss_scaling)
    : log_(log), last_checkpoint_(std::move(last_checkpoint)), loss_scaling_(loss_scaling) {}

void DivergenceGuard::record(int64_t step, const ScalerReadout& readout) {
  const int64_t first = last_recorded_step_ + 1;  // the steps this record covers: first..step
  last_recorded_step_ = step;
  const int64_t skipped = readout.skipped_steps - reported_skipped_;
  reported_skipped_ = readout.skipped_steps;
  if (skipped > 0) {
    const std::string scale = loss_scaling_ ? ", loss scale now " + std::to_string(readout.scale) : "";
    if (first == step)
      log_.warn("step " + std::to_string(step) + ": inf/nan gradients; step skipped" + scale);
    else
      log_.warn("steps " + std::to_string(first) + "-" + std::to_string(step) + ": " + std::to_string(skipped) +
                (skipped == 1 ? " had" : " of them had") + " inf/nan gradients and " + (skipped == 1 ? "was" : "were") +
                " skipped" + scale);
  }
  CNN_CHECK(readout.skipped_in_a_row < kMaxSkippedInARow, readout.skipped_in_a_row,
            " optimizer steps in a row had inf/nan gradients; training stopped. ",
            where_to_restart(last_checkpoint_), "; lower the learning rate");
}

void DivergenceGuard::check_loss(double mean_loss, int64_t step, int64_t epoch) const {
  CNN_CHECK(std::isfinite(mean_loss), "the training loss became ", mean_loss, " at step ", step, " (epoch ", epoch + 1,
            "); training stopped. ", where_to_restart(last_checkpoint_), "; lower the learning rate or enable gradient clipping");
}

void DivergenceGuard::check_weights(const Module& model, int64_t step) const {
  // A finite loss does not prove finite weights (a step with finite but huge gradients can
  // overflow them): never replace a good checkpoint with broken weights.
  CNN_CHECK(unscale_and_measure(model.parameters(), 1.0).finite(), "the weights hold inf/nan after step ", step,
            "; training stopped. ", where_to_restart(last_checkpoint_), "; lower the learning rate or enable gradient clipping");
}

}  // namespace cnn::train
