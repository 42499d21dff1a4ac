// The profiled steps of a run (see profile_window.h).
#include "train/profile_window.h"

namespace cnn::train {

ProfileWindow::ProfileWindow(int64_t warmup_steps, int64_t steps, const Device& device)
    : warmup_(warmup_steps), steps_(steps), device_(device) {}

ProfileWindow::~ProfileWindow() {
  if (!recording_) return;
  try {  // the run is ending early (an error unwinds the trainer): the recording is dropped
    profiler::stop();
  } catch (...) {
  }
}

void ProfileWindow::step_starts() {
  if (steps_ == 0 || finished_ || step_.open()) return;
  if (!recording_ && steps_ended_ == warmup_) {
    profiler::start();
    recording_ = true;
  }
  if (recording_) step_ = profiler::begin("step", profiler::Category::phase, device_);
}

void ProfileWindow::no_step() { profiler::cancel(step_); }

std::optional<profiler::Recording> ProfileWindow::step_ends() {
  ++steps_ended_;
  if (!step_.open()) return std::nullopt;
  profiler::end(step_);
  ++recorded_;
  if (recorded_ < steps_) return std::nullopt;
  return finish();
}

std::optional<profiler::Recording> ProfileWindow::run_ends() {
  if (!recording_) return std::nullopt;
  profiler::cancel(step_);
  std::optional<profiler::Recording> recording = finish();
  if (recorded_ == 0) return std::nullopt;
  return recording;
}

std::optional<profiler::Recording> ProfileWindow::finish() {
  recording_ = false;
  finished_ = true;
  return profiler::stop();
}

}  // namespace cnn::train
