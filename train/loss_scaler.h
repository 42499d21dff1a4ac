// The dynamic loss scaler of mixed-precision (fp16) training, as torch.cuda.amp.GradScaler: the
// loss is multiplied by scale() before backward; afterwards unscale() divides every gradient by the
// scale in one fused pass that also measures them (global norm, inf/nan count); update() then
// decides whether the optimizer may step (no inf/nan) and adapts the scale: times backoff_factor
// after an overflow, times growth_factor after growth_interval clean steps in a row.
//
// Disabled (fp32, bf16), the scale stays 1 and unscale() only measures; a step whose gradients hold
// inf/nan is still skipped and counted, so one bad batch cannot poison the weights.
#pragma once
#include <cstdint>
#include <vector>

#include "engine/tensor.h"
#include "train/optim/grad_norm.h"

namespace cnn::train {

class Config;

struct LossScalerOptions {
  bool enabled = true;
  bool dynamic = true;  // false: the scale stays at init_scale
  double init_scale = 65536.0;
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int64_t growth_interval = 2000;
};

// [precision] of a config: enabled for fp16 only.
LossScalerOptions loss_scaler_options(const Config& config);

class LossScaler {
 public:
  explicit LossScaler(LossScalerOptions options = {});

  double scale() const { return scale_; }
  // Unscales `grads` in place (one pass) and measures them.
  GradientStats unscale(const std::vector<Tensor>& grads) const;
  // Records a step's gradient statistics; returns whether the optimizer should step.
  bool update(const GradientStats& stats);

  int64_t skipped_steps() const { return skipped_; }
  int64_t clean_steps_in_a_row() const { return growth_tracker_; }

  // {scale, clean steps in a row, skipped steps}, for checkpoints.
  std::vector<double> state() const;
  void load_state(const std::vector<double>& state);

 private:
  LossScalerOptions options_;
  double scale_;
  int64_t growth_tracker_ = 0;
  int64_t skipped_ = 0;
};

}  // namespace cnn::train
