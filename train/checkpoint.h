// Training checkpoints: everything needed to resume a run exactly, in one HDF5 file
// (engine/io/hdf5.h) written atomically (a crash mid-save leaves the previous checkpoint intact).
//
// Layout: datasets model/<param>, buffers/<buffer> (BatchNorm running statistics),
// optimizer/<param>.<state>, trainer/lr_schedule and trainer/loss_scaler (f64 state vectors),
// ema/<name> and swa/<name> (the weight averages of train/ema.h and train/swa.h, when on); root
// attributes format = "cnn-checkpoint", format_version, epoch, step, seed, best_metric, config (the
// resolved INI text), class_names, samples_in_epoch, world_size, ema_updates, swa_models and
// weights (which weights model/ and buffers/ hold: "live", or "ema" / "swa" for a best.h5 or swa.h5
// of averaged weights). h5py reads it as is.
#pragma once
#include <cstdint>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "engine/io/named_tensors.h"

namespace cnn::train {

// The validation that made best.h5: of which weights ("live", "ema", "swa"), after which epoch, and
// its figures. Kept in checkpoints, so a resumed run reports the best.h5 it inherited.
struct BestValidation {
  int64_t epoch = -1;  // 1-based; -1: none yet (or a checkpoint from before it was recorded)
  std::string weights = "live";
  double top1 = std::numeric_limits<double>::quiet_NaN(), top5 = std::numeric_limits<double>::quiet_NaN();
  double loss = std::numeric_limits<double>::quiet_NaN();
  bool known() const { return epoch >= 0; }
};

struct TrainingState {
  io::NamedTensors params;     // model parameters
  io::NamedTensors buffers;    // non-trained model state
  io::NamedTensors optimizer;  // Optimizer::state()
  io::NamedTensors ema, swa;   // the weight averages (empty when off; swa also before its first model)
  int64_t ema_updates = 0, swa_models = 0;
  std::string weights = "live";  // what params and buffers hold (weights_name of train/weight_average.h)
  int64_t epoch = 0;           // epochs completed
  int64_t step = 0;            // optimizer steps taken
  // Where the unfinished epoch `epoch` stands: samples of its order used by all ranks together (0 at
  // an epoch boundary), and the number of ranks that trained. A run resumed on another number of
  // ranks continues from the sample position (data/sampler.h). -1: not recorded (older files).
  int64_t samples_in_epoch = -1;
  int64_t world_size = 1;
  uint64_t seed = 0;
  double best_metric = std::numeric_limits<double>::quiet_NaN();  // NaN: none yet
  BestValidation best;  // the validation behind best_metric
  std::vector<double> lr_schedule;  // LrSchedule::state()
  std::vector<double> loss_scaler;  // LossScaler::state()
  std::string config;               // Config::to_ini()
  std::vector<std::string> class_names;
};

void save_checkpoint(const std::filesystem::path& path, const TrainingState& state);
// A cnn::Error naming the file when it is missing, corrupt, or not a checkpoint of this format.
TrainingState load_checkpoint(const std::filesystem::path& path);

// <run_dir>/last.h5 (the latest state) and <run_dir>/best.h5 (the best validation metric so far).
std::filesystem::path last_checkpoint_path(const std::filesystem::path& run_dir);
std::filesystem::path best_checkpoint_path(const std::filesystem::path& run_dir);

}  // namespace cnn::train
