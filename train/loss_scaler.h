// The dynamic loss scaler of mixed-precision (fp16) training, as torch.cuda.amp.GradScaler, kept
// on the training device so that a step never waits for the host: the loss is multiplied by the
// scale before backward (the seed is a view of the device's scale, scale_tensor()); afterwards
// unscale() divides every gradient by the scale in one fused pass that also measures them (sum of
// squares, inf/nan count) into a device tensor; update() turns that into the step's verdict in a
// one-thread kernel (kernels/loss_scale.h): whether the optimizer's update applies (no inf/nan),
// the clipping coefficient, and the next scale (times backoff_factor after an overflow, times
// growth_factor after growth_interval clean steps in a row). The optimizer kernels read the verdict
// from control(). The host learns what happened only when it calls read() (a synchronisation on a
// GPU: the trainer does it at logged steps; on the CPU it costs nothing and happens every step).
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

// What the control block says, read back to the host.
struct ScalerReadout {
  double scale = 1;                 // the scale of the next backward
  int64_t clean_steps_in_a_row = 0;
  int64_t skipped_steps = 0;        // so far
  int64_t skipped_in_a_row = 0;     // up to the last step
  bool last_applied = true;         // whether the last step's update applied
  double last_norm = 0;             // the last step's unscaled global gradient norm
};

class LossScaler {
 public:
  explicit LossScaler(LossScalerOptions options = {}, Device device = Device::cpu());

  // The control block (kStepControlFields f32 values on the device, kernels/optimizer.h).
  const Tensor& control() const { return control_; }
  // The loss scale as a 0-d f32 tensor on the device (a view of the control block).
  Tensor scale_tensor() const;
  // Unscales `grads` in place (one pass) and measures them: {sum of squares, inf/nan count}, f32 on
  // the device, not read back.
  Tensor unscale(const std::vector<Tensor>& grads) const;
  // The step's verdict from the measurements (after every rank agreed on them), on the device:
  // clipping to clip_grad_norm (<= 0: off) by the measured norm.
  void update(const Tensor& measured, double clip_grad_norm = 0);
  // For tests and tools: update() from host figures, then read(); returns whether the step applies.
  bool update(const GradientStats& stats);

  // The control block read back (a synchronisation with the device).
  ScalerReadout read() const;
  double scale() const { return read().scale; }
  int64_t skipped_steps() const { return read().skipped_steps; }
  int64_t clean_steps_in_a_row() const { return read().clean_steps_in_a_row; }

  // {scale, clean steps in a row, skipped steps}, for checkpoints.
  std::vector<double> state() const;
  void load_state(const std::vector<double>& state);

 private:
  LossScalerOptions options_;
  Tensor control_;
};

}  // namespace cnn::train
