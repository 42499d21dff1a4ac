// Console output of a training run: messages filtered by log level (quiet: warnings, errors and
// the final summary; normal: also epoch summaries and progress; verbose: also details), and
// training progress drawn as a single redrawn bar on a terminal or as plain periodic lines
// otherwise (log files, CI), chosen automatically with isatty unless forced.
#pragma once
#include <cstdint>
#include <iosfwd>
#include <string>
#include <utility>
#include <vector>

namespace cnn::train {

enum class LogLevel { quiet, normal, verbose };
enum class ProgressMode { automatic, bar, lines };

LogLevel parse_log_level(const std::string& name);        // quiet | normal | verbose
ProgressMode parse_progress_mode(const std::string& name);  // auto | bar | lines

class Console {
 public:
  // `terminal`: whether `out` is a terminal (see stdout_is_terminal), for ProgressMode::automatic.
  Console(std::ostream& out, LogLevel level, ProgressMode mode, bool terminal, int64_t every_steps = 50);

  void summary(const std::string& message);  // always shown
  void warn(const std::string& message);     // always shown, prefixed "warning: "
  void info(const std::string& message);     // normal and verbose
  void detail(const std::string& message);   // verbose only

  // Progress within an epoch: `step` of `steps` done (1-based), with named numbers to show
  // ("loss", "lr", "img/s"). Bar mode redraws one line; lines mode prints every `every_steps`
  // steps and at the last step; quiet shows nothing.
  void progress(int64_t epoch, int64_t step, int64_t steps, const std::vector<std::pair<std::string, double>>& numbers);
  bool draws_bar() const { return bar_; }

 private:
  void end_bar();  // moves past a drawn bar before other output

  std::ostream& out_;
  LogLevel level_;
  bool bar_;
  int64_t every_steps_;
  bool bar_drawn_ = false;
};

bool stdout_is_terminal();

}  // namespace cnn::train
