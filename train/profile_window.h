// Which optimizer steps of a run the profiler records: [log] profile_warmup steps of this run
// first (allocations, cuDNN's algorithm choices and the caches settle), then [log] profile_steps
// steps, each one a "step" span from the data wait of its first micro-batch to the end of its
// logging. The trainer tells the window where each step starts and ends; the window starts and
// stops the recording (engine/profiler.h) and hands it over when the last profiled step has ended.
#pragma once
#include <cstdint>
#include <optional>

#include "engine/device.h"
#include "engine/profiler.h"

namespace cnn::train {

class ProfileWindow {
 public:
  // steps = 0: never records. `device`: the training device, on whose stream the steps' spans mark.
  ProfileWindow(int64_t warmup_steps, int64_t steps, const Device& device);
  ~ProfileWindow();  // stops a recording still running (what it holds is dropped)
  ProfileWindow(const ProfileWindow&) = delete;
  ProfileWindow& operator=(const ProfileWindow&) = delete;

  // Before the data wait of a step's first micro-batch (again before each next micro-batch of the
  // same step is harmless): starts the recording at the first profiled step, and the step's span.
  void step_starts();
  // The loader had no batch left, so no step began: its span is dropped.
  void no_step();
  // After the step's update and logging: ends its span; returns the recording when this was the
  // last profiled step.
  std::optional<profiler::Recording> step_ends();
  // The run stops: a recording still running (the run had fewer steps than the window) ends with
  // the steps it holds; nullopt when there is none or it holds no step.
  std::optional<profiler::Recording> run_ends();

  // Whether the current step is being recorded.
  bool recording() const { return recording_; }
  int64_t steps_recorded() const { return recorded_; }
  int64_t steps_wanted() const { return steps_; }
  // The first profiled step, counted from 1 at this run's first step.
  int64_t first_step() const { return warmup_ + 1; }

 private:
  std::optional<profiler::Recording> finish();

  const int64_t warmup_, steps_;
  const Device device_;
  int64_t steps_ended_ = 0;  // steps of this run that ended
  int64_t recorded_ = 0;     // of them, in the recording
  bool recording_ = false, finished_ = false;
  profiler::SpanHandle step_;
};

}  // namespace cnn::train
