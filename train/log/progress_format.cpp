// The one format of a run's figures (see progress_format.h).
#include "train/log/progress_format.h"

#include <algorithm>
#include <cstdio>
#include <sstream>
#include <vector>

namespace cnn::train {

namespace {
bool known(double v) { return std::isfinite(v); }

std::string fixed(double v, int decimals) {
  char text[64];
  std::snprintf(text, sizeof text, "%.*f", decimals, v);
  return text;
}

std::string significant(double v, int digits) {
  char text[64];
  std::snprintf(text, sizeof text, "%.*g", digits, v);
  return text;
}

std::vector<std::string> fields_of(const StepFigures& f) {
  std::vector<std::string> fields;
  if (known(f.loss)) fields.push_back("loss " + fixed(f.loss, 4));
  if (known(f.lr)) fields.push_back("lr " + significant(f.lr, 4));
  if (known(f.images_per_second)) fields.push_back(fixed(f.images_per_second, 0) + " img/s");
  if (known(f.data_wait)) fields.push_back("wait " + fixed(100 * f.data_wait, 1) + "%");
  if (known(f.loss_scale)) fields.push_back("scale " + significant(f.loss_scale, 6));
  if (known(f.peak_memory_bytes)) {
    std::string memory = "mem " + format_bytes(f.peak_memory_bytes);
    if (known(f.reserved_memory_bytes)) memory += " (" + format_bytes(f.reserved_memory_bytes) + " reserved)";
    fields.push_back(memory);
  }
  if (known(f.elapsed_seconds)) fields.push_back(format_duration(f.elapsed_seconds));
  if (known(f.epoch_eta_seconds)) fields.push_back("eta " + format_duration(f.epoch_eta_seconds));
  if (known(f.run_eta_seconds)) fields.push_back("run eta " + format_duration(f.run_eta_seconds));
  return fields;
}

// "100/234", built by appending: GCC 12's -Wrestrict misfires on "literal" + std::to_string(...).
std::string of_total(int64_t done, int64_t total) {
  std::string text = std::to_string(done);
  text += '/';
  text += std::to_string(total);
  return text;
}

std::string epoch_of(const StepFigures& f) {
  std::string text = "epoch ";
  text += std::to_string(f.epoch);
  if (f.epochs > 0) {
    text += '/';
    text += std::to_string(f.epochs);
  }
  return text;
}

std::string bar_of(int64_t done, int64_t total, int width, bool colour) {
  const int filled = total > 0 ? static_cast<int>(static_cast<int64_t>(width) * std::min(done, total) / total) : 0;
  std::string bar = "[";
  if (colour) bar += "\033[32m";
  bar += std::string(static_cast<size_t>(filled), '#');
  if (colour) bar += "\033[0m";
  return bar + std::string(static_cast<size_t>(width - filled), '.') + "]";
}
}  // namespace

std::string format_duration(double seconds) {
  if (!known(seconds) || seconds < 0) return "?";
  const auto total = static_cast<int64_t>(std::llround(seconds));
  const int64_t h = total / 3600, m = total / 60 % 60, s = total % 60;
  char text[48];
  if (h > 0)
    std::snprintf(text, sizeof text, "%lld:%02lld:%02lld", static_cast<long long>(h), static_cast<long long>(m),
                  static_cast<long long>(s));
  else
    std::snprintf(text, sizeof text, "%lld:%02lld", static_cast<long long>(m), static_cast<long long>(s));
  return text;
}

int field_count(const StepFigures& figures) { return static_cast<int>(fields_of(figures).size()); }

std::string format_fields(const StepFigures& figures, int keep) {
  const std::vector<std::string> fields = fields_of(figures);
  std::string text;
  for (int i = 0; i < std::min<int>(keep, static_cast<int>(fields.size())); ++i) text += "  " + fields[static_cast<size_t>(i)];
  return text;
}

std::string format_line(const StepFigures& f) {
  return epoch_of(f) + " step " + of_total(f.step, f.steps) + format_fields(f);
}

std::string format_bar(const StepFigures& f, int width, bool colour) {
  const std::string head = epoch_of(f) + " ", position = std::string(" ") + of_total(f.step, f.steps);
  const auto make = [&](int keep, int bar_width, bool with_colour) {
    return head + bar_of(f.step, f.steps, bar_width, with_colour) + position + format_fields(f, keep);
  };
  const auto fits = [&](int keep, int bar_width) { return static_cast<int>(make(keep, bar_width, false).size()) <= width; };
  // Narrow terminals: drop fields from the end first, then narrow the bar, then cut the line.
  for (int keep = field_count(f); keep >= 0; --keep)
    if (fits(keep, 30)) return make(keep, 30, colour);
  for (int bar_width : {20, 10})
    if (fits(0, bar_width)) return make(0, bar_width, colour);
  return make(0, 10, false).substr(0, static_cast<size_t>(std::max(width, 0)));
}

std::string format_epoch_line(const EpochLine& e) {
  const StepFigures& f = e.figures;
  std::string text = epoch_of(f);
  text += f.step >= f.steps ? std::string(" done") : " stopped at " + of_total(f.step, f.steps);
  text += format_fields(f);
  if (e.corrupt_images > 0) text += "  " + std::to_string(e.corrupt_images) + " corrupt images skipped";
  if (known(e.val_loss)) text += "; " + format_validation_figures(e);
  if (e.val_corrupt_images > 0) text += "  " + std::to_string(e.val_corrupt_images) + " corrupt validation images skipped";
  return text;
}

std::string format_validation_figures(const EpochLine& e) {
  return "val loss " + fixed(e.val_loss, 4) + "  top-1 " + fixed(e.val_top1, 2) + "%" +
         (known(e.ema_top1) ? " (ema " + fixed(e.ema_top1, 2) + "%)" : "") +
         (known(e.val_top5) ? "  top-5 " + fixed(e.val_top5, 2) + "%" : "");  // none with 5 classes or fewer
}

std::string format_validation_bar(int64_t done, int64_t total, int width) {
  const std::string position = std::string(" ") + of_total(done, total);
  const int bar_width = std::clamp(width - 11 - static_cast<int>(position.size()), 0, 20);
  return "validate " + bar_of(done, total, bar_width, false) + position;
}

std::string format_best_weights(const std::string& weights) {
  return weights.empty() || weights == "live" ? "" : " (" + weights + " weights)";
}

std::string format_run_report(const RunReport& r) {
  std::ostringstream out;
  const auto row = [&](const char* name, const std::string& value) {
    char label[16];
    std::snprintf(label, sizeof label, "  %-10s ", name);
    out << label << value << "\n";
  };
  if (r.best_top1 >= 0) {
    std::string best =
        "epoch " + std::to_string(r.best_epoch) + format_best_weights(r.best_weights) + ": top-1 " + fixed(r.best_top1, 2) + "%";
    if (known(r.best_top5)) best += ", top-5 " + fixed(r.best_top5, 2) + "%";
    if (known(r.best_loss)) best += ", loss " + fixed(r.best_loss, 4);
    row("best", best);
  }
  const double training = std::max(0.0, r.total_seconds - r.validation_seconds);
  row("time", format_duration(r.total_seconds) + " in all: " + format_duration(training) + " training, " +
                  format_duration(r.validation_seconds) + " validation");
  std::string steps = std::to_string(r.steps) + " optimizer steps";
  if (r.skipped_steps) steps += " (" + std::to_string(r.skipped_steps) + " skipped: inf/nan gradients)";
  row("steps", steps);
  row("speed", fixed(r.images_per_second, 0) + " img/s, data wait " + fixed(100 * r.data_wait, 1) + "%");
  row("run folder", r.run_dir);
  if (!r.best_checkpoint.empty()) row("best", r.best_checkpoint);
  if (!r.last_checkpoint.empty()) row("last", r.last_checkpoint);
  const std::string predict_from = r.best_checkpoint.empty() ? r.last_checkpoint : r.best_checkpoint;
  if (!predict_from.empty()) row("predict", "cnn_infer --checkpoint " + predict_from + " IMAGES...");
  if (r.interrupted) row("resume", "cnn_train " + (r.config_path.empty() ? std::string("CONFIG.ini") : r.config_path) +
                                        " --resume " + r.run_dir);
  return out.str();
}

}  // namespace cnn::train
