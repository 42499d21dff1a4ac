// The run's train.log and metrics (see run_log.h).
#include "train/run_log.h"

#include <ctime>
#include <iomanip>
#include <sstream>

#include "train/train_settings.h"

namespace cnn::train {

std::string timestamp(const char* format) {
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  std::ostringstream out;
  out << std::put_time(&local, format);
  return out.str();
}

RunLog::RunLog(Console& console, const std::filesystem::path& file) : console_(console) {
  if (!file.empty()) file_.open(file, std::ios::app);
}

void RunLog::summary(const std::string& message) {
  console_.summary(message);
  write(message);
}

void RunLog::info(const std::string& message) {
  console_.info(message);
  write(message);
}

void RunLog::warn(const std::string& message) {
  console_.warn(message);
  write("warning: " + message);
}

void RunLog::progress(const StepFigures& figures, bool log_line) {
  console_.progress(figures, log_line);
  if (log_line) write(format_line(figures));
}

void RunLog::write(const std::string& message) {
  if (!file_.is_open()) return;
  file_ << "[" << timestamp("%Y-%m-%d %H:%M:%S") << "] " << message << "\n";
  file_.flush();
}

RunMetrics::RunMetrics(const LogSettings& settings, const std::filesystem::path& run_dir) {
  if (settings.jsonl) jsonl_ = std::make_unique<MetricsJsonl>(run_dir / "metrics.jsonl");
  if (settings.tensorboard) events_ = std::make_unique<EventWriter>(run_dir);
}

void RunMetrics::write_step(int64_t step, int64_t epoch, const std::map<std::string, double>& numbers) {
  if (jsonl_) jsonl_->write(step, epoch + 1, numbers);
  add_scalars("train/", step, numbers);
}

void RunMetrics::write_epoch(int64_t step, int64_t epoch, const std::map<std::string, double>& numbers) {
  if (jsonl_) jsonl_->write(step, epoch + 1, numbers, {{"kind", "epoch"}});
  add_scalars("epoch/", step, numbers);
  if (events_) events_->flush();
}

void RunMetrics::add_scalars(const std::string& prefix, int64_t step, const std::map<std::string, double>& numbers) {
  if (!events_) return;
  for (const auto& [name, value] : numbers) events_->add_scalar(prefix + name, value, step);
}

}  // namespace cnn::train
