// The figures a person watching a run needs, in one format: the progress bar, the periodic lines,
// train.log and the epoch line show the same fields, in the same order and with the same decimals:
//
//   epoch 2/8 [########..........] 100/234  loss 0.3512  lr 0.095  1712 img/s  wait 0.2%  0:42  eta 0:56  run eta 8:31
//
// loss: 4 decimals (the mean over the steps since the last display: smoothed, and read from the
// device only then); lr: 4 significant digits; images/s of all ranks; data wait in percent with one
// decimal; then, when they apply, the fp16 loss scale and the CUDA peak memory; elapsed time of the
// epoch and the ETAs of the epoch and of the run (a moving average of step time, validation left
// out). Figures that are not known yet (NaN) are left out.
#pragma once
#include <cmath>
#include <cstdint>
#include <string>

#include "engine/byte_size.h"

namespace cnn::train {

struct StepFigures {
  int64_t epoch = 0, epochs = 0;  // 1-based
  int64_t step = 0, steps = 0;    // batches done in the epoch, of the epoch's batches
  double loss = std::nan("");
  double lr = std::nan("");
  double images_per_second = std::nan("");
  double data_wait = std::nan("");  // a fraction in [0, 1]
  double loss_scale = std::nan("");
  double peak_memory_bytes = std::nan("");      // the allocator's peak in use
  double reserved_memory_bytes = std::nan("");  // and what it holds from the device
  double elapsed_seconds = std::nan("");
  double epoch_eta_seconds = std::nan(""), run_eta_seconds = std::nan("");
};

// 42 s -> "0:42", 187 s -> "3:07", 3723 s -> "1:02:03".
std::string format_duration(double seconds);
using cnn::format_bytes;  // engine/byte_size.h: 3.2e9 -> "3.0 GiB"

// The fields after the position: "loss 0.3512  lr 0.0950  1712 img/s  wait 0.2%  ...".
// `keep` fields at most (the others, from the end, are dropped), for narrow terminals.
std::string format_fields(const StepFigures& figures, int keep = 100);
int field_count(const StepFigures& figures);

// A plain line: "epoch 2/8 step 100/234  <fields>".
std::string format_line(const StepFigures& figures);

// The bar, at most `width` columns wide (fields dropped from the end, then the bar narrowed, when
// the terminal is narrow), with the filled part coloured when `colour`.
std::string format_bar(const StepFigures& figures, int width, bool colour);

// The epoch line: "epoch 2/8 done  <fields>; val loss 0.3014  top-1 88.92%  top-5 99.84%", where
// the figures are the epoch's (mean loss, its time, the run's ETA), "stopped at 120/234" replaces
// "done" for an epoch cut short, and the validation part is there when the epoch validated. Each
// part ends with its count of unreadable images left out, when there were any.
struct EpochLine {
  StepFigures figures;
  int64_t corrupt_images = 0;      // training images left out as unreadable
  int64_t val_corrupt_images = 0;  // validation images left out as unreadable
  double val_loss = std::nan(""), val_top1 = std::nan(""), val_top5 = std::nan("");
  double ema_top1 = std::nan("");  // of the EMA weights, shown after the top-1: "top-1 91.20% (ema 91.80%)"
};
std::string format_epoch_line(const EpochLine& line);
// The validation part of the epoch line: "val loss 0.3014  top-1 88.92% (ema 89.10%)  top-5 99.84%"
// (the EMA's top-1 only when known).
std::string format_validation_figures(const EpochLine& line);

// The short bar of a validation pass on a terminal: "validate [#####.....] 20/40".
std::string format_validation_bar(int64_t done, int64_t total, int width);

// " (ema weights)" or " (swa weights)" after a best epoch; "" for the live weights (or "").
std::string format_best_weights(const std::string& weights);

// What the end of a run reports, below the "done:" line.
struct RunReport {
  double best_top1 = -1;  // percent; -1: no validation
  int64_t best_epoch = -1;
  std::string best_weights;  // "ema" or "swa" are named; "live" (or empty) is not
  double best_loss = std::nan(""), best_top5 = std::nan("");
  double total_seconds = 0, validation_seconds = 0;
  double images_per_second = 0, data_wait = 0;
  int64_t steps = 0, skipped_steps = 0;
  std::string run_dir, best_checkpoint, last_checkpoint;
  std::string config_path;  // the config to resume with (the run folder's config.ini)
  bool interrupted = false;
};
// A few aligned lines: best epoch and metrics, time (training vs validation), speed and data wait,
// the run folder and checkpoints, and the commands to use next (cnn_infer; --resume after an
// interruption).
std::string format_run_report(const RunReport& report);

}  // namespace cnn::train
