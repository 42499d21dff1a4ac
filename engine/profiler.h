// The profiler: a recorder of named, nested spans of time, off by default, in the spirit of
// torch.profiler. Three kinds of span feed it:
//   - op:     every kernel call, from CNN_KERNEL (engine/backend.h), named after the kernel
//             ("conv2d_forward", "batch_norm_backward_reduce");
//   - module: every Module::forward, named by the module's dotted path ("layer1.0.conv1");
//   - phase:  what callers mark with a Scope ("forward", "backward", "optimizer step", "data wait").
//
//   profiler::start();
//   { const profiler::Scope span("forward", profiler::Category::phase, device); model.forward(x); }
//   const profiler::Recording recording = profiler::stop();   // every span, with its times
//
// Every span has its host times (steady clock, from where it opened to where it closed on its
// thread). A span on a CUDA device also records a timed CUDA event on the device's current stream
// at both ends (engine/cuda_event_timing.h), so it has a device time too: the time the stream
// took over the work enqueued between the two marks. stop() waits for those events.
//
// Off, a span costs a relaxed load of one flag and a branch when it opens, and a test of its own
// member when it closes: nothing is allocated, read from the clock or locked. On, a span takes a
// lock twice (threads may record at once, each with its own nesting) and, on CUDA, two events.
#pragma once
#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/device.h"

namespace cnn::profiler {

enum class Category { op, module, phase };
const char* category_name(Category category);  // "op", "module", "phase"

// One closed span of a recording.
struct Span {
  std::string name;  // the kernel's, the module's path, or the phase's
  std::string type;  // module spans: the module's type ("Conv2d"); empty otherwise
  Category category = Category::phase;
  int thread = 0;   // the recording thread: 0, 1, ... in the order threads first recorded a span
  int depth = 0;    // how many spans of the same thread enclosed it when it opened
  int parent = -1;  // index in Recording::spans of the innermost of those, -1 when none
  Device device = Device::cpu();  // where its work ran
  uintptr_t stream = 0;           // CUDA spans: the stream its events were recorded on (0: the default stream)
  // Microseconds since the recording started, on the host's steady clock.
  double host_start_us = 0, host_end_us = 0;
  // CUDA spans: when the stream reached the span's two marks, in microseconds on the same scale (the
  // device clock is aligned with the host's once per device when the device first records). NaN on the CPU.
  double device_start_us = 0, device_end_us = 0;

  bool on_device() const { return device.is_cuda(); }
  double host_us() const { return host_end_us - host_start_us; }
  double device_us() const { return device_end_us - device_start_us; }
  // The device time of a CUDA span (what the GPU spent), else the host time.
  double time_us() const { return on_device() ? device_us() : host_us(); }
};

struct Recording {
  std::vector<Span> spans;  // in the order they opened; spans still open at stop() are left out
  int threads = 0;          // distinct recording threads
  double seconds = 0;       // from start() to stop()
};

namespace detail {
extern std::atomic<bool> recording_on;
}

// Whether spans are being recorded now.
inline bool enabled() { return detail::recording_on.load(std::memory_order_relaxed); }

// Starts a recording; a cnn::Error when one is already running.
void start();
// Ends the recording (waiting for its CUDA events) and returns it; a cnn::Error when none runs.
Recording stop();

// A span opened by hand and closed with end() (or dropped with cancel()), for work whose start and
// end are in different places. A handle made while the profiler is off does nothing.
class SpanHandle {
 public:
  SpanHandle() = default;
  bool open() const { return index_ >= 0; }

 private:
  friend SpanHandle begin(std::string name, Category category, const Device& device, std::string type);
  friend void end(SpanHandle& span);
  friend void cancel(SpanHandle& span);
  int64_t index_ = -1;
  uint64_t generation_ = 0;  // of the recording it belongs to (a later recording ignores it)
};

SpanHandle begin(std::string name, Category category, const Device& device, std::string type = {});
// Closes it; a no-op for a handle that is not open. Throws when the device fails to record the
// span's end (the span is then left out of the recording, and the handle closed all the same).
void end(SpanHandle& span);
void cancel(SpanHandle& span);  // leaves it out of the recording
// end() for destructors: a failure is not thrown (the failed device reports itself at its next call).
void close_quietly(SpanHandle& span) noexcept;

// A span over a C++ scope.
class Scope {
 public:
  Scope(const char* name, Category category, const Device& device) {
    if (enabled()) [[unlikely]]
      span_ = begin(name, category, device);
  }
  ~Scope() {
    if (span_.open()) [[unlikely]]
      close_quietly(span_);
  }
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

 private:
  SpanHandle span_;
};

// The span of a module's forward pass. Its name is the module's dotted path, built from the names
// of the modules whose forward passes enclose it on this thread: `name` is the module's own name in
// its parent ("conv1"; empty for a model), `type` its type ("Conv2d"), which also names a model.
class ModuleScope {
 public:
  ModuleScope(const std::string& name, const std::string& type, const Device& device) {
    if (enabled()) [[unlikely]]
      open(name, type, device);
  }
  ~ModuleScope() {
    if (span_.open()) [[unlikely]]
      close();
  }
  ModuleScope(const ModuleScope&) = delete;
  ModuleScope& operator=(const ModuleScope&) = delete;

 private:
  void open(const std::string& name, const std::string& type, const Device& device);
  void close();
  SpanHandle span_;
};

}  // namespace cnn::profiler
