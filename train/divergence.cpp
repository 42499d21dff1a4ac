// The inf/nan policy of training (see divergence.h).
#include "train/divergence.h"

#include <cmath>
#include <string>

#include "engine/error.h"
#include "train/optim/grad_norm.h"
#include "train/run_log.h"

namespace cnn::train {

DivergenceGuard::DivergenceGuard(RunLog& log, std::filesystem::path last_checkpoint, bool loss_scaling)
    : log_(log), last_checkpoint_(std::move(last_checkpoint)), loss_scaling_(loss_scaling) {}

void DivergenceGuard::record(const StepOutcome& outcome) {
  if (outcome.applied) {
    skipped_in_a_row_ = 0;
    return;
  }
  ++skipped_;
  if (loss_scaling_)
    log_.warn("step " + std::to_string(outcome.step) + ": inf/nan gradients at loss scale " + std::to_string(outcome.loss_scale) +
              "; step skipped, scale lowered to " + std::to_string(outcome.next_loss_scale));
  else
    log_.warn("step " + std::to_string(outcome.step) + ": inf/nan gradients; step skipped");
  CNN_CHECK(++skipped_in_a_row_ < kMaxSkippedInARow, kMaxSkippedInARow,
            " optimizer steps in a row had inf/nan gradients; training stopped. ", "The last good checkpoint is ",
            last_checkpoint_.string(), "; lower the learning rate");
}

void DivergenceGuard::check_loss(double mean_loss, int64_t step, int64_t epoch) const {
  CNN_CHECK(std::isfinite(mean_loss), "the training loss became ", mean_loss, " at step ", step, " (epoch ", epoch + 1,
            "); training stopped. The last good checkpoint is ", last_checkpoint_.string(),
            "; lower the learning rate or enable gradient clipping");
}

void DivergenceGuard::check_weights(const Module& model, int64_t step) const {
  // A finite loss does not prove finite weights (a step with finite but huge gradients can
  // overflow them): never replace a good checkpoint with broken weights.
  CNN_CHECK(unscale_and_measure(model.parameters(), 1.0).finite(), "the weights hold inf/nan after step ", step,
            "; training stopped. The last good checkpoint is ", last_checkpoint_.string(),
            "; lower the learning rate or enable gradient clipping");
}

}  // namespace cnn::train
