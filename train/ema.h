// The exponential moving average of a model's weights (timm's ModelEmaV2/V3): after every
// `every_steps` optimizer steps, ema += (1 - d) (weights - ema) over every parameter and floating
// buffer, in f32 (train/weight_average.h), on the training device or the CPU. With warmup the decay
// of the update after t earlier ones is d = min(decay, (1 + t) / (10 + t)) (the adjusted decay of
// TensorFlow's ExponentialMovingAverage with num_updates): the early average follows the fast-moving
// weights instead of remembering the random initialisation for thousands of steps.
//
//   Ema ema(model, {.decay = 0.9998});
//   ema.after_step(model, step);  // after each optimizer step
//   { WeightSwap swap(model, &ema.average()); validate(model, ...); }
#pragma once
#include <cstdint>
#include <string>

#include "train/weight_average.h"

namespace cnn::train {

struct EmaSettings {
  double decay = 0;  // 0: off
  bool warmup = true;
  int64_t every_steps = 1;
  bool on_cpu = false;  // keep the average in host memory (device = cpu) rather than on the training device
  bool on() const { return decay > 0; }
};

// The decay of the update that follows `updates` earlier ones.
double ema_decay(const EmaSettings& settings, int64_t updates);

class Ema {
 public:
  // Starts as a copy of the model's weights.
  Ema(const Module& model, const EmaSettings& settings);
  // After optimizer step `step` (the count of steps taken, 1-based): an update when it is due.
  void after_step(const Module& model, int64_t step);
  // One update now.
  void update(const Module& model);
  int64_t updates() const { return updates_; }
  const EmaSettings& settings() const { return settings_; }
  const WeightAverage& average() const { return average_; }
  // Restores the average and its update count from a checkpoint.
  void load(const io::NamedTensors& tensors, int64_t updates, const std::string& source);

 private:
  EmaSettings settings_;
  WeightAverage average_;
  int64_t updates_ = 0;
};

}  // namespace cnn::train
