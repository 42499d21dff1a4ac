// The model and what changes it, built from the settings: the model from the zoo (pretrained
// weights loaded, moved to the device and the compute dtype), the optimizer over its parameter
// groups, the learning-rate schedule and the loss scaler, and the weight averages (EMA, SWA) when
// they are on. And the checkpoint of a run: the learner
// with the run's progress, saved to and restored from the HDF5 layout of train/checkpoint.h.
#pragma once
#include <cstdint>
#include <filesystem>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "layers/module.h"
#include "train/checkpoint.h"
#include "train/loss_scaler.h"
#include "train/ema.h"
#include "train/optim/optimizer.h"
#include "train/schedule/lr_schedule.h"
#include "train/swa.h"

namespace cnn::train {

struct TrainSettings;
class RunLog;

struct Learner {
  std::unique_ptr<Module> model;
  std::unique_ptr<Optimizer> optimizer;
  LrSchedule schedule;
  LossScaler scaler;
  std::unique_ptr<Ema> ema;  // null: [ema] off
  std::unique_ptr<Swa> swa;  // null: [swa] off
};

// The average holding `weights` (null for the live weights); a cnn::Error when that average is off.
const WeightAverage* averaged_weights(const Learner& learner, Weights weights);

// `steps_per_epoch` optimizer steps make an epoch (for the schedule).
Learner build_learner(const TrainSettings& settings, int64_t steps_per_epoch, RunLog& log);

// Where a run stands.
struct RunProgress {
  int64_t epochs_done = 0;  // epochs completed (the next epoch to train)
  int64_t step = 0;         // optimizer steps taken
  double best_metric = std::numeric_limits<double>::quiet_NaN();  // NaN: no validation yet
  BestValidation best;      // what best_metric was measured on
  // Of the checkpoint resumed: samples of the unfinished epoch used by all its ranks together (-1:
  // not recorded, older checkpoints), and how many ranks trained.
  int64_t samples_in_epoch = -1;
  int64_t world_size = 1;
};

// Loads a checkpoint, read from `checkpoint`, into the learner (a cnn::Error when it belongs to
// another model) and says so in the log; returns the progress it recorded.
RunProgress restore_learner(Learner& learner, const TrainingState& saved, const std::filesystem::path& checkpoint, RunLog& log);

// Writes the learner and `progress` to `path` (with `epochs_done` as the epoch count: an epoch cut
// short by max_steps is not done, and `samples_in_epoch` of it were used by all ranks together),
// the resolved config, the class names and the number of ranks. With `weights` other than live the
// file's model weights are that average's (a best.h5 of the EMA, swa.h5), and it says so.
void save_learner(const std::filesystem::path& path, const Learner& learner, const RunProgress& progress, int64_t epochs_done,
                  int64_t samples_in_epoch, const TrainSettings& settings, const std::vector<std::string>& class_names,
                  Weights weights = Weights::live);

}  // namespace cnn::train
