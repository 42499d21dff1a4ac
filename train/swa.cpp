// The SWA running average (see swa.h).
#include "train/swa.h"

namespace cnn::train {

bool Swa::after_epoch(const Module& model, int64_t number) {
  if (!settings_.on() || number < settings_.start_epoch || (number - settings_.start_epoch) % settings_.every_epochs != 0)
    return false;
  add(model);
  return true;
}

void Swa::add(const Module& model) {
  if (!average_) average_ = std::make_unique<WeightAverage>(model, model.device());
  average_->update(model, 1.0 / static_cast<double>(models_ + 1));  // the first: weight 1, a copy
  ++models_;
}

void Swa::take_from(const Module& model) {
  if (!average_) average_ = std::make_unique<WeightAverage>(model, model.device());
  average_->update(model, 1.0);
}

void Swa::load(const Module& model, const io::NamedTensors& tensors, int64_t models, const std::string& source) {
  models_ = models;
  if (models == 0) return;
  average_ = std::make_unique<WeightAverage>(model, model.device());
  average_->load(tensors, source);
}

}  // namespace cnn::train
