// Dynamic loss scaling: scale bookkeeping around the fused unscale-and-measure pass.
#include "train/loss_scaler.h"

#include "engine/error.h"
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

LossScaler::LossScaler(LossScalerOptions options) : options_(options), scale_(options.enabled ? options.init_scale : 1.0) {
  CNN_CHECK(scale_ > 0 && options.growth_factor > 1 && options.backoff_factor > 0 && options.backoff_factor < 1 &&
                options.growth_interval >= 1,
            "loss scaler: need init_scale > 0, growth_factor > 1, 0 < backoff_factor < 1 and growth_interval >= 1 (got ",
            options.init_scale, ", ", options.growth_factor, ", ", options.backoff_factor, ", ", options.growth_interval,
            ")");
}

GradientStats LossScaler::unscale(const std::vector<Tensor>& grads) const {
  return unscale_and_measure(grads, 1.0 / scale_);
}

bool LossScaler::update(const GradientStats& stats) {
  const bool adapt = options_.enabled && options_.dynamic;
  if (!stats.finite()) {
    ++skipped_;
    growth_tracker_ = 0;
    if (adapt) scale_ *= options_.backoff_factor;
    return false;
  }
  if (adapt && ++growth_tracker_ == options_.growth_interval) {
    scale_ *= options_.growth_factor;
    growth_tracker_ = 0;
  }
  return true;
}

std::vector<double> LossScaler::state() const {
  return {scale_, static_cast<double>(growth_tracker_), static_cast<double>(skipped_)};
}

void LossScaler::load_state(const std::vector<double>& state) {
  CNN_CHECK(state.size() == 3, "loss scaler state has ", state.size(), " values, expected 3");
  scale_ = state[0];
  growth_tracker_ = static_cast<int64_t>(state[1]);
  skipped_ = static_cast<int64_t>(state[2]);
}

}  // namespace cnn::train
