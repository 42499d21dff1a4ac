// CUDA events that keep timing (cudaEventCreate without cudaEventDisableTiming): the profiler
// records one on a stream where a span starts and one where it ends, and reads the device time
// between them once the work has run (cudaEventElapsedTime, about half a microsecond resolution).
// The plain cuda::Event of cuda_context.h disables timing, which makes recording it cheaper; this
// one is only created while a profile is recorded. Without CUDA, constructing one is a cnn::Error.
#pragma once

namespace cnn::cuda {

class TimedEvent {
 public:
  explicit TimedEvent(int device);
  ~TimedEvent();
  TimedEvent(const TimedEvent&) = delete;
  TimedEvent& operator=(const TimedEvent&) = delete;

  void record(void* stream);  // marks the work enqueued on `stream` so far
  void synchronize();         // the host waits for the mark
  int device() const { return device_; }

  // Milliseconds of device time from `start`'s mark to `end`'s (both recorded, both passed, same
  // device; they may be on different streams).
  static double elapsed_ms(const TimedEvent& start, const TimedEvent& end);

 private:
  int device_;
  void* event_ = nullptr;
};

}  // namespace cnn::cuda
