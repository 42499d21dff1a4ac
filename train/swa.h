// Stochastic weight averaging (Izmailov et al. 2018; torch.optim.swa_utils): from epoch
// `start_epoch` on, the weights at the end of every `every_epochs`-th epoch join an equal-weight
// running average (AveragedModel's default: the (n+1)-th model with weight 1 / (n + 1)), kept in f32
// on the training device (train/weight_average.h). Its learning rate (SWALR) is the schedule's
// (train/schedule/lr_schedule.h); its BatchNorm statistics are recomputed at the end of training
// (train/update_bn.h), since the average of running statistics is not the statistics of the
// averaged weights.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "train/weight_average.h"

namespace cnn::train {

struct SwaSettings {
  int64_t start_epoch = 0;  // 1-based first SWA epoch; 0: off
  int64_t every_epochs = 1;
  bool on() const { return start_epoch > 0; }
};

class Swa {
 public:
  explicit Swa(const SwaSettings& settings) : settings_(settings) {}
  // At the end of epoch `number` (1-based): adds the model to the average when that epoch is one of
  // the SWA epochs that count (number >= start_epoch, every every_epochs of them). Returns whether it did.
  bool after_epoch(const Module& model, int64_t number);
  // Adds the model now.
  void add(const Module& model);
  int64_t models() const { return models_; }
  // The average (null before its first model).
  const WeightAverage* average() const { return average_.get(); }
  // Replaces the average by the model's floating state (its recomputed BatchNorm statistics).
  void take_from(const Module& model);
  // Restores a checkpoint's average of `models` models (none: nothing to restore).
  void load(const Module& model, const io::NamedTensors& tensors, int64_t models, const std::string& source);

 private:
  SwaSettings settings_;
  std::unique_ptr<WeightAverage> average_;
  int64_t models_ = 0;
};

}  // namespace cnn::train
