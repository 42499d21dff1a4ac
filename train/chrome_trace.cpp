// A recording as a Chrome trace (see chrome_trace.h).
#include "train/chrome_trace.h"

#include <cmath>
#include <map>
#include <sstream>
#include <string>
#include <utility>

namespace cnn::train {

namespace {
constexpr int kHostProcess = 0;
int device_process(int device_index) { return 1 + device_index; }

nlohmann::json metadata(const char* kind, int pid, int tid, const std::string& name) {
  return {{"ph", "M"}, {"name", kind}, {"pid", pid}, {"tid", tid}, {"args", {{"name", name}}}};
}

// Microseconds to the nanosecond: shorter text than the doubles' own digits.
double rounded(double us) { return std::round(us * 1000) / 1000; }

nlohmann::json complete_event(const profiler::Span& span, int pid, int tid, double start_us, double end_us) {
  nlohmann::json args = {{"depth", span.depth}};
  if (!span.type.empty()) args["type"] = span.type;
  return {{"ph", "X"},  {"name", span.name}, {"cat", profiler::category_name(span.category)},
          {"pid", pid}, {"tid", tid},        {"ts", rounded(start_us)},
          {"dur", rounded(end_us - start_us)},        {"args", args}};
}

std::string stream_name(uintptr_t stream) {
  if (stream == 0) return "default stream";
  std::ostringstream out;
  out << "stream 0x" << std::hex << stream;
  return out.str();
}
}  // namespace

nlohmann::json chrome_trace(const profiler::Recording& recording) {
  nlohmann::json events = nlohmann::json::array();
  events.push_back(metadata("process_name", kHostProcess, 0, "host"));
  for (int thread = 0; thread < recording.threads; ++thread)
    events.push_back(metadata("thread_name", kHostProcess, thread, thread == 0 ? "thread 0 (the first to record)" : "thread " + std::to_string(thread)));
  // Streams numbered per device in the order they first appear.
  std::map<std::pair<int, uintptr_t>, int> stream_rows;
  std::map<int, int> streams_of_device;
  for (const profiler::Span& span : recording.spans) {
    events.push_back(complete_event(span, kHostProcess, span.thread, span.host_start_us, span.host_end_us));
    if (!span.on_device()) continue;
    const int device = span.device.index;
    auto [row, added] = stream_rows.try_emplace({device, span.stream}, 0);
    if (added) {
      row->second = streams_of_device[device]++;
      if (row->second == 0) events.push_back(metadata("process_name", device_process(device), 0, span.device.str()));
      events.push_back(metadata("thread_name", device_process(device), row->second, stream_name(span.stream)));
    }
    events.push_back(complete_event(span, device_process(device), row->second, span.device_start_us, span.device_end_us));
  }
  return {{"traceEvents", events}, {"displayTimeUnit", "ms"}};
}

}  // namespace cnn::train
