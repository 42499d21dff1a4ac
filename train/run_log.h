// What a training run writes as it goes: RunLog, the console's messages mirrored to train.log with
// a timestamp per line, and RunMetrics, the numbers of logged steps and of epochs written to
// metrics.jsonl and the TensorBoard event files (each when enabled in [log]).
#pragma once
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "train/log/console.h"
#include "train/log/metrics_jsonl.h"
#include "train/log/tensorboard.h"

namespace cnn::train {

struct LogSettings;

// The local time now, as std::put_time writes `format`.
std::string timestamp(const char* format);

// Everything the console shows goes to train.log too, with a timestamp per line.
class RunLog {
 public:
  // An empty `file`: the console only (the ranks other than 0 of a data-parallel run).
  RunLog(Console& console, const std::filesystem::path& file);
  void summary(const std::string& message);
  void info(const std::string& message);
  void warn(const std::string& message);
  // The console's progress display; with `log_line` (a logged step) also a plain line in the
  // console's lines mode and in train.log.
  void progress(const StepFigures& figures, bool log_line);

 private:
  void write(const std::string& message);
  Console& console_;
  std::ofstream file_;
};

class RunMetrics {
 public:
  RunMetrics(const LogSettings& settings, const std::filesystem::path& run_dir);
  // `epoch` is the 0-based index the trainer counts with; metrics.jsonl records it 1-based, as the
  // console, confusion.json and the report count epochs.
  // A logged step's numbers: a metrics.jsonl line and TensorBoard scalars "train/<name>".
  void write_step(int64_t step, int64_t epoch, const std::map<std::string, double>& numbers);
  // An epoch's numbers: a metrics.jsonl line of kind "epoch", scalars "epoch/<name>", then a flush.
  void write_epoch(int64_t step, int64_t epoch, const std::map<std::string, double>& numbers);
  // The TensorBoard writer, for images and histograms; null with [log] tensorboard = false.
  EventWriter* events() { return events_.get(); }

 private:
  void add_scalars(const std::string& prefix, int64_t step, const std::map<std::string, double>& numbers);
  std::unique_ptr<MetricsJsonl> jsonl_;
  std::unique_ptr<EventWriter> events_;
};

}  // namespace cnn::train
