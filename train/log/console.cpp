// Console messages by level, and the progress bar or progress lines.
#include "train/log/console.h"

#include <unistd.h>

#include <cstdio>
#include <iomanip>
#include <ostream>
#include <sstream>

#include "engine/error.h"

namespace cnn::train {

namespace {
constexpr int kBarWidth = 30;

std::string format_numbers(const std::vector<std::pair<std::string, double>>& numbers) {
  std::ostringstream s;
  for (const auto& [name, value] : numbers) s << "  " << name << " " << std::setprecision(4) << value;
  return s.str();
}
}  // namespace

LogLevel parse_log_level(const std::string& name) {
  if (name == "quiet") return LogLevel::quiet;
  if (name == "normal") return LogLevel::normal;
  if (name == "verbose") return LogLevel::verbose;
  throw Error("unknown log level '" + name + "'; use quiet, normal or verbose");
}

ProgressMode parse_progress_mode(const std::string& name) {
  if (name == "auto") return ProgressMode::automatic;
  if (name == "bar") return ProgressMode::bar;
  if (name == "lines") return ProgressMode::lines;
  throw Error("unknown progress mode '" + name + "'; use auto, bar or lines");
}

bool stdout_is_terminal() { return isatty(fileno(stdout)) != 0; }

Console::Console(std::ostream& out, LogLevel level, ProgressMode mode, bool terminal, int64_t every_steps)
    : out_(out),
      level_(level),
      bar_(mode == ProgressMode::bar || (mode == ProgressMode::automatic && terminal)),
      every_steps_(every_steps < 1 ? 1 : every_steps) {}

void Console::end_bar() {
  if (bar_drawn_) out_ << '\n';
  bar_drawn_ = false;
}

void Console::summary(const std::string& message) {
  end_bar();
  out_ << message << '\n' << std::flush;
}

void Console::warn(const std::string& message) {
  end_bar();
  out_ << "warning: " << message << '\n' << std::flush;
}

void Console::info(const std::string& message) {
  if (level_ == LogLevel::quiet) return;
  end_bar();
  out_ << message << '\n' << std::flush;
}

void Console::detail(const std::string& message) {
  if (level_ != LogLevel::verbose) return;
  end_bar();
  out_ << message << '\n' << std::flush;
}

void Console::progress(int64_t epoch, int64_t step, int64_t steps,
                       const std::vector<std::pair<std::string, double>>& numbers) {
  if (level_ == LogLevel::quiet || steps <= 0) return;
  if (bar_) {
    const int filled = static_cast<int>(kBarWidth * step / steps);
    out_ << "\r\033[2Kepoch " << epoch << " [" << std::string(static_cast<size_t>(filled), '#')
         << std::string(static_cast<size_t>(kBarWidth - filled), '.') << "] " << step << "/" << steps
         << format_numbers(numbers) << std::flush;
    bar_drawn_ = true;
    if (step == steps) end_bar();
    return;
  }
  if (step % every_steps_ != 0 && step != steps) return;
  out_ << "epoch " << epoch << " step " << step << "/" << steps << format_numbers(numbers) << '\n' << std::flush;
}

}  // namespace cnn::train
