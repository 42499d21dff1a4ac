// Console output of a training run: messages filtered by log level (quiet: warnings, errors and
// the final summary; normal: also epoch summaries and progress; verbose: also details), and
// training progress drawn as a single redrawn bar on a terminal or as plain periodic lines
// otherwise (log files, CI), chosen automatically with isatty unless forced. The bar redraws at
// most a few times a second, fits the terminal's width, and is coloured only on a terminal without
// NO_COLOR. The figures' format is progress_format.h's.
#pragma once
#include <chrono>
#include <cstdint>
#include <iosfwd>
#include <string>

#include "train/log/progress_format.h"

namespace cnn::train {

enum class LogLevel { quiet, normal, verbose };
enum class ProgressMode { automatic, bar, lines };

LogLevel parse_log_level(const std::string& name);        // quiet | normal | verbose
ProgressMode parse_progress_mode(const std::string& name);  // auto | bar | lines

class Console {
 public:
  // `terminal`: whether `out` is a terminal (see stdout_is_terminal), for ProgressMode::automatic.
  // `colour`: ANSI colours (see use_colour); `width`: the bar's columns (0: the terminal's).
  Console(std::ostream& out, LogLevel level, ProgressMode mode, bool terminal, bool colour = false, int width = 0);

  void summary(const std::string& message);  // always shown
  void warn(const std::string& message);     // always shown, prefixed "warning: "
  void info(const std::string& message);     // normal and verbose
  void detail(const std::string& message);   // verbose only

  // Progress within an epoch (figures.step of figures.steps batches done). Bar mode redraws one line
  // (at most every 0.2 s, and at the last step); lines mode prints a line when `line_due` (the
  // logged steps) and at the last step; quiet shows nothing.
  void progress(const StepFigures& figures, bool line_due);
  // A validation pass, `done` of `total` batches: a short bar, in bar mode only.
  void validation_progress(int64_t done, int64_t total);
  bool draws_bar() const { return bar_; }
  int width() const { return width_; }

 private:
  void end_bar();  // moves past a drawn bar before other output

  bool redraw_due(bool last);

  std::ostream& out_;
  LogLevel level_;
  bool bar_;
  bool colour_;
  int width_;
  bool bar_drawn_ = false;
  std::chrono::steady_clock::time_point last_draw_{};
};

bool stdout_is_terminal();
// Colours on a terminal, unless NO_COLOR is set (to anything but empty, https://no-color.org) or
// TERM is "dumb". `getenv` for tests.
bool use_colour(bool terminal, const char* (*getenv)(const char*) = nullptr);
// Columns of the terminal on standard output: the ioctl's answer, else $COLUMNS, else 100.
int terminal_width();

}  // namespace cnn::train
