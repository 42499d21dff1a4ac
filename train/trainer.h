// The training loop behind cnn_train: builds the model, data, optimizer and schedule from a Config,
// trains with the tape (mixed precision, gradient accumulation, checkpointing of blocks, clipping),
// validates, and writes the run folder:
//   <dir>/<YYYYmmdd_HHMMSS>_<name>/  config.ini (resolved), train.log, metrics.jsonl, TensorBoard
//   events, classes.txt, confusion.json (last validation), last.h5, best.h5, model.safetensors, and with
//   [log] profile_steps profile.txt, profile.json and trace.json (profile_report.h).
// A resumed run (--resume RUN_DIR or a checkpoint file) continues in the folder of its checkpoint.
//
// run_training (trainer.cpp) reads top-down: settings (train_settings.h), run folder (run_folder.h),
// data (training_data.h), learner and checkpoints (learner.h), then the epochs: the training step
// (train_step.h), the inf/nan policy (divergence.h), the end of an epoch with validation
// (validation.h), logging (run_log.h), and the final summary.
#pragma once
#include <filesystem>
#include <functional>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "engine/distributed/world.h"
#include "train/config/config.h"
#include "train/train_step.h"

namespace cnn::train {

struct TrainRunOptions {
  std::string resume;           // "" (start afresh, unless [checkpoint] resume says otherwise), a run folder or a file
  std::ostream* console = nullptr;  // default: standard output
  bool record_step_losses = false;  // keep every micro-batch's loss in the summary (reads it back each time)
  GradientHook on_gradients;        // optional: called with each step's final gradients (train_step.h)
  // Optional: called after each validation batch with the epoch (0-based) and the batches done so
  // far, for an embedder's progress display.
  std::function<void(int64_t epoch, int64_t batches_done)> on_validation_batch;
  // Where this process stands in a data-parallel job; default: read from the launcher's
  // environment (engine/distributed/world.h). A World{} runs alone even under mpirun.
  std::optional<distributed::World> world;
};

struct TrainSummary {
  std::filesystem::path run_dir;
  int64_t epochs_run = 0, steps = 0;
  int64_t skipped_steps = 0;  // optimizer steps skipped for inf/nan gradients (divergence.h)
  bool interrupted = false;   // stopped by Ctrl-C / SIGTERM after a step (last.h5 holds it)
  // The validation best.h5 was chosen by ([checkpoint] best_metric), also when it came before a resume:
  // its top-1 in percent (-1: none), its epoch, and whose weights it measured ("live", "ema", "swa").
  double best_top1 = -1;
  int64_t best_epoch = -1;
  std::string best_weights;
  double last_top1 = -1, last_val_loss = -1;
  double last_ema_top1 = -1;  // of the EMA weights ([ema] on)
  double swa_top1 = -1;       // of the SWA average at the end ([swa] on)
  double seconds = 0, images_per_second = 0, data_wait_share = 0;
  std::vector<double> step_losses;  // with record_step_losses: the loss of every micro-batch
};

TrainSummary run_training(const Config& config, const TrainRunOptions& options = {});

}  // namespace cnn::train
