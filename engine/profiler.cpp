// The profiler's recorder (see profiler.h): one recording at a time, its spans in one table behind
// a lock, each thread's open spans on a stack of its own (for nesting), and the CUDA events of
// device spans, resolved to times at stop().
#include "engine/profiler.h"

#include <chrono>
#include <cmath>
#include <map>
#include <memory>
#include <mutex>
#include <utility>

#include "engine/cuda_context.h"
#include "engine/cuda_event_timing.h"
#include "engine/error.h"

namespace cnn::profiler {

namespace detail {
std::atomic<bool> recording_on{false};
}

namespace {
using Clock = std::chrono::steady_clock;

struct Record {
  Span span;
  bool closed = false, cancelled = false;
  std::unique_ptr<cuda::TimedEvent> start_event, end_event;  // CUDA spans
};

// Where a device's clock stands against the host's: an event recorded and waited for when the
// device first records in this recording, and the host time just after it passed.
struct DeviceOrigin {
  std::unique_ptr<cuda::TimedEvent> event;
  double host_us = 0;
};

struct Recorder {
  std::mutex mutex;
  bool running = false;
  uint64_t generation = 0;  // counts recordings; a span belongs to the one it opened in
  Clock::time_point origin;
  std::vector<Record> records;
  std::map<int, DeviceOrigin> device_origins;
  int threads = 0;
  // Timed events of finished recordings, per device, for the next ones (creating events costs).
  std::map<int, std::vector<std::unique_ptr<cuda::TimedEvent>>> spare_events;

  double now_us() const { return std::chrono::duration<double, std::micro>(Clock::now() - origin).count(); }

  std::unique_ptr<cuda::TimedEvent> take_event(int device) {
    std::vector<std::unique_ptr<cuda::TimedEvent>>& spare = spare_events[device];
    if (spare.empty()) return std::make_unique<cuda::TimedEvent>(device);
    std::unique_ptr<cuda::TimedEvent> event = std::move(spare.back());
    spare.pop_back();
    return event;
  }
  void give_back(std::unique_ptr<cuda::TimedEvent> event) {
    if (event) spare_events[event->device()].push_back(std::move(event));
  }
};

Recorder& recorder() {
  static Recorder* r = new Recorder;  // never destroyed: threads may still close spans at exit
  return *r;
}

// The calling thread's part of the recording: its number and its open spans, innermost last.
struct ThreadState {
  uint64_t generation = 0;
  int number = 0;
  std::vector<int64_t> open;
  std::vector<std::string> module_paths;  // of the ModuleScopes open on this thread
};
thread_local ThreadState this_thread;

// This thread's state for the current recording (renumbered when a new recording started).
ThreadState& thread_state(Recorder& r) {
  if (this_thread.generation != r.generation) {
    this_thread.generation = r.generation;
    this_thread.number = r.threads++;
    this_thread.open.clear();
  }
  return this_thread;
}

// Device time of `event` in microseconds on the recording's scale.
double device_time_us(const DeviceOrigin& origin, const cuda::TimedEvent& event) {
  return origin.host_us + 1000.0 * cuda::TimedEvent::elapsed_ms(*origin.event, event);
}
}  // namespace

const char* category_name(Category category) {
  switch (category) {
    case Category::op: return "op";
    case Category::module: return "module";
    case Category::phase: return "phase";
  }
  return "?";
}

void start() {
  Recorder& r = recorder();
  const std::lock_guard<std::mutex> lock(r.mutex);
  CNN_CHECK(!r.running, "profiler::start: a recording is already running; call profiler::stop() first");
  ++r.generation;
  r.running = true;
  r.records.clear();
  r.device_origins.clear();
  r.threads = 0;
  r.origin = Clock::now();
  detail::recording_on.store(true, std::memory_order_relaxed);
}

Recording stop() {
  Recorder& r = recorder();
  const std::lock_guard<std::mutex> lock(r.mutex);
  CNN_CHECK(r.running, "profiler::stop: no recording is running; call profiler::start() first");
  detail::recording_on.store(false, std::memory_order_relaxed);
  r.running = false;
  ++r.generation;  // spans still open now are left out; closing them later does nothing
  Recording recording;
  recording.seconds = r.now_us() / 1e6;
  recording.threads = r.threads;
  // Closed spans only, with their parents' indices renumbered to match.
  std::vector<int> kept(r.records.size(), -1);
  for (size_t i = 0; i < r.records.size(); ++i) {
    Record& record = r.records[i];
    if (!record.closed || record.cancelled) {
      r.give_back(std::move(record.start_event));
      r.give_back(std::move(record.end_event));
      continue;
    }
    Span span = std::move(record.span);
    span.parent = span.parent >= 0 ? kept[static_cast<size_t>(span.parent)] : -1;
    if (record.start_event) {
      record.end_event->synchronize();
      const DeviceOrigin& origin = r.device_origins.at(span.device.index);
      span.device_start_us = device_time_us(origin, *record.start_event);
      span.device_end_us = device_time_us(origin, *record.end_event);
      r.give_back(std::move(record.start_event));
      r.give_back(std::move(record.end_event));
    }
    kept[i] = static_cast<int>(recording.spans.size());
    recording.spans.push_back(std::move(span));
  }
  for (auto& [device, origin] : r.device_origins) r.give_back(std::move(origin.event));
  r.records.clear();
  r.device_origins.clear();
  return recording;
}

SpanHandle begin(std::string name, Category category, const Device& device, std::string type) {
  SpanHandle handle;
  if (!enabled()) return handle;
  Recorder& r = recorder();
  const std::lock_guard<std::mutex> lock(r.mutex);
  if (!r.running) return handle;  // stopped in between
  ThreadState& thread = thread_state(r);
  Record record;
  Span& span = record.span;
  span.name = std::move(name);
  span.type = std::move(type);
  span.category = category;
  span.thread = thread.number;
  span.depth = static_cast<int>(thread.open.size());
  span.parent = thread.open.empty() ? -1 : static_cast<int>(thread.open.back());
  span.device = device;
  span.device_start_us = span.device_end_us = std::nan("");
  if (device.is_cuda()) {
    cuda::set_device(device.index);
    void* stream = cuda::current_stream(device.index);
    span.stream = reinterpret_cast<uintptr_t>(stream);
    if (!r.device_origins.count(device.index)) {
      DeviceOrigin origin{.event = r.take_event(device.index)};
      origin.event->record(stream);
      origin.event->synchronize();
      origin.host_us = r.now_us();
      r.device_origins.emplace(device.index, std::move(origin));
    }
    record.start_event = r.take_event(device.index);
    record.end_event = r.take_event(device.index);
    record.start_event->record(stream);
  }
  span.host_start_us = r.now_us();  // last: the set-up above is not the span's time
  handle.index_ = static_cast<int64_t>(r.records.size());
  handle.generation_ = r.generation;
  thread.open.push_back(handle.index_);
  r.records.push_back(std::move(record));
  return handle;
}

namespace {
// Takes `span` off its thread's stack of open spans (it is the innermost one unless spans were
// ended out of order); returns its record, or null when it belongs to an earlier recording.
Record* close_on_thread(Recorder& r, int64_t index, uint64_t generation) {
  if (generation != r.generation) return nullptr;
  std::vector<int64_t>& open = thread_state(r).open;
  for (auto it = open.rbegin(); it != open.rend(); ++it)
    if (*it == index) {
      open.erase(std::next(it).base());
      break;
    }
  return &r.records[static_cast<size_t>(index)];
}
}  // namespace

void end(SpanHandle& span) {
  if (!span.open()) return;
  Recorder& r = recorder();
  const std::lock_guard<std::mutex> lock(r.mutex);
  const double end_us = r.now_us();
  const int64_t index = std::exchange(span.index_, -1);
  if (Record* record = close_on_thread(r, index, span.generation_)) {
    record->span.host_end_us = end_us;
    try {
      if (record->end_event) record->end_event->record(reinterpret_cast<void*>(record->span.stream));
    } catch (...) {  // the device failed: the span has no end mark, so it is left out
      record->cancelled = true;
      throw;
    }
    record->closed = true;
  }
}

void close_quietly(SpanHandle& span) noexcept {
  try {
    end(span);
  } catch (...) {
  }
}

void cancel(SpanHandle& span) {
  if (!span.open()) return;
  Recorder& r = recorder();
  const std::lock_guard<std::mutex> lock(r.mutex);
  if (Record* record = close_on_thread(r, span.index_, span.generation_)) record->cancelled = true;
  span.index_ = -1;
}

void ModuleScope::open(const std::string& name, const std::string& type, const Device& device) {
  std::vector<std::string>& paths = this_thread.module_paths;
  const std::string parent = paths.empty() ? std::string() : paths.back();
  // A module without a name (a model, or a module its owner did not register) is named by its type
  // and leaves its children's paths as they are.
  std::string path = name.empty() ? parent : parent.empty() ? name : parent + "." + name;
  paths.push_back(path);
  span_ = begin(name.empty() ? type : std::move(path), Category::module, device, type);
  if (!span_.open()) paths.pop_back();  // the recording stopped in between: close() will not run
}

void ModuleScope::close() {
  if (!this_thread.module_paths.empty()) this_thread.module_paths.pop_back();
  close_quietly(span_);
}

}  // namespace cnn::profiler
