// The EMA of the weights (see ema.h).
#include "train/ema.h"

#include <algorithm>

namespace cnn::train {

double ema_decay(const EmaSettings& settings, int64_t updates) {
  if (!settings.warmup) return settings.decay;
  const double t = static_cast<double>(updates);
  return std::min(settings.decay, (1.0 + t) / (10.0 + t));
}

Ema::Ema(const Module& model, const EmaSettings& settings)
    : settings_(settings), average_(model, settings.on_cpu ? Device::cpu() : model.device()) {}

void Ema::after_step(const Module& model, int64_t step) {
  if (step % settings_.every_steps == 0) update(model);
}

void Ema::update(const Module& model) {
  average_.update(model, 1.0 - ema_decay(settings_, updates_));
  ++updates_;
}

void Ema::load(const io::NamedTensors& tensors, int64_t updates, const std::string& source) {
  average_.load(tensors, source);
  updates_ = updates;
}

}  // namespace cnn::train
