// Console messages by level, and the progress bar or progress lines.
#include "train/log/console.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <ostream>

#include "engine/error.h"

namespace cnn::train {

namespace {
constexpr auto kRedrawInterval = std::chrono::milliseconds(200);
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

bool use_colour(bool terminal, const char* (*getenv)(const char*)) {
  if (!getenv) getenv = [](const char* name) -> const char* { return std::getenv(name); };
  const char* no_colour = getenv("NO_COLOR");
  const char* term = getenv("TERM");
  return terminal && !(no_colour && *no_colour) && !(term && std::string(term) == "dumb");
}

int terminal_width() {
  winsize size{};
  if (ioctl(fileno(stdout), TIOCGWINSZ, &size) == 0 && size.ws_col > 0) return size.ws_col;
  if (const char* columns = std::getenv("COLUMNS")) {
    const int n = std::atoi(columns);
    if (n > 0) return n;
  }
  return 100;
}

Console::Console(std::ostream& out, LogLevel level, ProgressMode mode, bool terminal, bool colour, int width)
    : out_(out),
      level_(level),
      bar_(mode == ProgressMode::bar || (mode == ProgressMode::automatic && terminal)),
      colour_(colour),
      width_(width > 0 ? width : terminal_width()) {}

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
  out_ << (colour_ ? "\033[33mwarning:\033[0m " : "warning: ") << message << '\n' << std::flush;
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

bool Console::redraw_due(bool last) {
  const auto now = std::chrono::steady_clock::now();
  if (!last && bar_drawn_ && now - last_draw_ < kRedrawInterval) return false;
  last_draw_ = now;
  return true;
}

void Console::progress(const StepFigures& figures, bool line_due) {
  if (level_ == LogLevel::quiet || figures.steps <= 0) return;
  const bool last = figures.step >= figures.steps;
  if (bar_) {
    if (!redraw_due(last)) return;
    // Carriage return, erase the line, draw: one bar that never wraps (format_bar fits the width).
    out_ << "\r\033[2K" << format_bar(figures, width_ - 1, colour_) << std::flush;
    bar_drawn_ = true;
    if (last) end_bar();
    return;
  }
  if (!line_due && !last) return;
  out_ << format_line(figures) << '\n' << std::flush;
}

void Console::validation_progress(int64_t done, int64_t total) {
  if (level_ == LogLevel::quiet || !bar_ || total <= 0) return;
  const bool last = done >= total;
  if (!redraw_due(last)) return;
  out_ << "\r\033[2K" << format_validation_bar(done, total, width_ - 1) << std::flush;
  bar_drawn_ = true;
  if (last) {  // the epoch line replaces it
    out_ << "\r\033[2K" << std::flush;
    bar_drawn_ = false;
  }
}

}  // namespace cnn::train
