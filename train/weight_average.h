// A running average of a model's weights, the common part of EMA (train/ema.h) and SWA
// (train/swa.h): an f32 copy of every parameter and floating buffer (BatchNorm's running mean and
// variance; state_dict names) on a device of its own choosing, moved towards the model by the fused
// multi-tensor kernel of kernels/weight_average.h: avg += weight * (model - avg), one launch for
// the whole model. Integer buffers (num_batches_tracked) are not averaged: a model holding an
// average keeps its own counts, which is what timm's ModelEmaV2 copying them at each update gives.
//
//   WeightAverage ema(model, Device::cpu());
//   ema.update(model, 1 - decay);
//   { WeightSwap swap(model, &ema); validate(model, ...); }  // the averaged weights, then the model's again
#pragma once
#include <string>

#include "engine/device.h"
#include "engine/io/named_tensors.h"
#include "layers/module.h"

namespace cnn::train {

// The model's parameters and floating buffers, in state_dict order, sharing storage with the model.
io::NamedTensors floating_state(const Module& model);

class WeightAverage {
 public:
  // Starts as an f32 copy of the model's floating state on `device`.
  WeightAverage(const Module& model, const Device& device);
  // avg += weight * (model - avg) for every tensor (weight 1: a copy), in one kernel on the
  // average's device (the model's tensors are copied there first when they live elsewhere).
  void update(const Module& model, double weight);
  // The averaged tensors by state_dict name, for checkpoints, and their restoration from one (the
  // same names and shapes, else a cnn::Error naming `source`).
  const io::NamedTensors& tensors() const { return tensors_; }
  void load(const io::NamedTensors& saved, const std::string& source);
  const Device& device() const { return device_; }

 private:
  Device device_;
  io::NamedTensors tensors_;
};

// Puts an average's weights into a model for as long as it lives (validation, saving, SWA's
// BatchNorm pass), then the model's own state back exactly: parameters and every buffer, counts
// included. A null average changes nothing. Putting the state back allocates and may fail (out of
// memory): the error is thrown from the destructor, unless the scope is already being left by an
// exception, which then goes on (the run is ending; the model's state no longer matters).
class WeightSwap {
 public:
  WeightSwap(Module& model, const WeightAverage* average);
  ~WeightSwap() noexcept(false);
  WeightSwap(const WeightSwap&) = delete;
  WeightSwap& operator=(const WeightSwap&) = delete;

 private:
  Module& model_;
  io::NamedTensors saved_;  // copies of the model's own state; empty: nothing was swapped
  int exceptions_at_start_ = 0;  // std::uncaught_exceptions() when the swap began
};

// Which weights a checkpoint or an exported model holds: the trained ("live") weights, their EMA
// or the SWA average. The name is written into the file.
enum class Weights { live, ema, swa };
const char* weights_name(Weights weights);

}  // namespace cnn::train
