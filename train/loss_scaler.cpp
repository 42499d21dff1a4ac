// Dynamic loss scaling on the device: the control block, its verdict kernel, and reading it back.
#include "train/loss_scaler.h"

#include <algorithm>

#include "engine/backend.h"
#include "engine/error.h"
#include "kernels/loss_scale.h"
#include "train/config/config.h"

namespace cnn::train {

LossScalerOptions loss_scaler_options(const Config& config) {
  LossScalerOptions o;
  o.enabled = config.text("precision.mode") == "fp16";
  o.dynamic = config.text("precision.loss_scale") == "dynamic";
  o.init_scale = config.real("precision.init_scale");
  o.growth_factor = config.real("precision.growth_factor");
  o.backoff_factor = config.real("precision.backoff_factor");
  o.growth_interval = config.integer("precision.growth_interval");
  return o;
}

LossScaler::LossScaler(LossScalerOptions options, Device device) : options_(options) {
  const double scale = options.enabled ? options.init_scale : 1.0;
  CNN_CHECK(scale > 0 && options.growth_factor > 1 && options.backoff_factor > 0 && options.backoff_factor < 1 &&
                options.growth_interval >= 1,
            "loss scaler: need init_scale > 0, growth_factor > 1, 0 < backoff_factor < 1 and growth_interval >= 1 (got ",
            options.init_scale, ", ", options.growth_factor, ", ", options.backoff_factor, ", ", options.growth_interval,
            ")");
  std::vector<float> block(kernels::kStepControlFields, 0.f);
  block[kernels::kStepControlScale] = static_cast<float>(scale);
  block[kernels::kStepControlApply] = 1.f;
  block[kernels::kStepControlGradScale] = 1.f;
  control_ = Tensor::from_vector<float>(block, {kernels::kStepControlFields}).to(device);
}

Tensor LossScaler::scale_tensor() const {
  return control_.slice(kernels::kStepControlScale, kernels::kStepControlScale + 1).reshape({});
}

Tensor LossScaler::unscale(const std::vector<Tensor>& grads) const { return unscale_and_measure_on_device(grads, control_); }

void LossScaler::update(const Tensor& measured, double clip_grad_norm) {
  CNN_CHECK(measured.device() == control_.device() && measured.dtype() == DType::f32 && measured.numel() == 2,
            "loss scaler: the measurements ", describe(measured), " must be 2 f32 values on ", control_.device().str());
  kernels::StepControlArgs args;
  args.max_norm = clip_grad_norm;
  args.adapt_scale = options_.enabled && options_.dynamic;
  args.growth_factor = static_cast<float>(options_.growth_factor);
  args.backoff_factor = static_cast<float>(options_.backoff_factor);
  args.growth_interval = static_cast<int>(std::min<int64_t>(options_.growth_interval, 1 << 30));
  CNN_KERNEL(control_.device(), step_control, measured.data_as<float>(), args, control_.data_as<float>());
}

bool LossScaler::update(const GradientStats& stats) {
  const Tensor measured =
      Tensor::from_vector<float>({static_cast<float>(stats.norm * stats.norm), static_cast<float>(stats.non_finite)}, {2})
          .to(control_.device());
  update(measured);
  return read().last_applied;
}

ScalerReadout LossScaler::read() const {
  const std::vector<double> c = control_.to_doubles();
  return {.scale = c[kernels::kStepControlScale],
          .clean_steps_in_a_row = static_cast<int64_t>(c[kernels::kStepControlGrowthTracker]),
          .skipped_steps = static_cast<int64_t>(c[kernels::kStepControlSkipped]),
          .skipped_in_a_row = static_cast<int64_t>(c[kernels::kStepControlSkippedInARow]),
          .last_applied = c[kernels::kStepControlApply] != 0,
          .last_norm = c[kernels::kStepControlNorm]};
}

std::vector<double> LossScaler::state() const {
  const ScalerReadout r = read();
  return {r.scale, static_cast<double>(r.clean_steps_in_a_row), static_cast<double>(r.skipped_steps)};
}

void LossScaler::load_state(const std::vector<double>& state) {
  CNN_CHECK(state.size() == 3, "loss scaler state has ", state.size(), " values, expected 3");
  const std::vector<double> now = control_.to_doubles();
  std::vector<float> block(now.begin(), now.end());
  block[kernels::kStepControlScale] = static_cast<float>(state[0]);
  block[kernels::kStepControlGrowthTracker] = static_cast<float>(state[1]);
  block[kernels::kStepControlSkipped] = static_cast<float>(state[2]);
  block[kernels::kStepControlSkippedInARow] = 0.f;
  control_ = Tensor::from_vector<float>(block, {kernels::kStepControlFields}).to(control_.device());
}

}  // namespace cnn::train
