// The profile of training steps: tables, JSON and the files of the run folder (see profile_report.h).
#include "train/profile_report.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <sstream>
#include <utility>

#include "engine/byte_size.h"
#include "engine/io/atomic_file.h"
#include "train/log/json_text.h"
#include "train/chrome_trace.h"

namespace cnn::train {

namespace {
constexpr const char* kStepSpan = "step";       // profile_window.h
constexpr const char* kDataWaitSpan = "data wait";  // the trainer's wait for the loader

struct Interval {
  double start = 0, end = 0;
};

bool inside_a_step(const profiler::Span& span, const std::vector<Interval>& steps) {
  for (const Interval& step : steps)
    if (span.host_start_us >= step.start && span.host_end_us <= step.end) return true;
  return false;
}

// Rows of one category: the spans of each name summed, largest main time first.
std::vector<ProfileRow> rows_of(const std::vector<const profiler::Span*>& spans, profiler::Category category) {
  std::map<std::string, ProfileRow> by_name;
  for (const profiler::Span* span : spans) {
    if (span->category != category) continue;
    ProfileRow& row = by_name[span->name];
    row.name = span->name;
    row.type = span->type;
    ++row.calls;
    row.host_ms += span->host_us() / 1000;
    if (span->on_device()) row.device_ms += span->device_us() / 1000;
  }
  std::vector<ProfileRow> rows;
  for (auto& [name, row] : by_name) rows.push_back(std::move(row));
  return rows;
}

// The time a row is judged by: on the device when its spans ran there, else the wall clock.
double main_ms(const ProfileRow& row) { return row.device_ms > 0 ? row.device_ms : row.host_ms; }

void add_shares(std::vector<ProfileRow>& rows, double step_host_ms, double step_device_ms) {
  for (ProfileRow& row : rows) {
    const double whole = row.device_ms > 0 ? step_device_ms : step_host_ms;
    row.share = whole > 0 ? main_ms(row) / whole : 0;
  }
  std::stable_sort(rows.begin(), rows.end(), [](const ProfileRow& a, const ProfileRow& b) { return main_ms(a) > main_ms(b); });
}

std::string fixed(double value, int decimals) {
  char text[64];
  std::snprintf(text, sizeof text, "%.*f", decimals, value);
  return text;
}

std::string padded_left(const std::string& text, size_t width) {
  return text.size() >= width ? text : std::string(width - text.size(), ' ') + text;
}

std::string display_name(const ProfileRow& row) {
  return row.type.empty() || row.type == row.name ? row.name : row.name + " (" + row.type + ")";
}

nlohmann::json rows_json(const std::vector<ProfileRow>& rows, bool on_device) {
  nlohmann::json out = nlohmann::json::array();
  for (const ProfileRow& row : rows) {
    const double calls = static_cast<double>(row.calls);
    nlohmann::json r = {{"name", row.name},
                        {"calls", row.calls},
                        {"host_total_ms", row.host_ms},
                        {"host_mean_ms", row.host_ms / calls},
                        {"share_of_step", row.share}};
    if (!row.type.empty()) r["type"] = row.type;
    if (on_device) {
      r["device_total_ms"] = row.device_ms;
      r["device_mean_ms"] = row.device_ms / calls;
    }
    out.push_back(r);
  }
  return out;
}
}  // namespace

ProfileSummary summarize_profile(const profiler::Recording& recording, const ProfileContext& context) {
  ProfileSummary summary;
  summary.context = context;
  summary.on_device = context.device.is_cuda();
  std::vector<Interval> steps;
  double step_host_ms = 0, step_device_ms = 0;
  for (const profiler::Span& span : recording.spans)
    if (span.category == profiler::Category::phase && span.name == kStepSpan) {
      steps.push_back({span.host_start_us, span.host_end_us});
      step_host_ms += span.host_us() / 1000;
      if (span.on_device()) step_device_ms += span.device_us() / 1000;
    }
  std::vector<const profiler::Span*> counted;
  for (const profiler::Span& span : recording.spans)
    if (inside_a_step(span, steps)) counted.push_back(&span);
  summary.steps = static_cast<int64_t>(steps.size());
  if (summary.steps == 0) return summary;
  const double n = static_cast<double>(summary.steps);
  summary.step_ms = step_host_ms / n;
  summary.step_device_ms = step_device_ms / n;
  summary.phases = rows_of(counted, profiler::Category::phase);
  summary.ops = rows_of(counted, profiler::Category::op);
  summary.modules = rows_of(counted, profiler::Category::module);
  for (std::vector<ProfileRow>* rows : {&summary.phases, &summary.ops, &summary.modules}) add_shares(*rows, step_host_ms, step_device_ms);
  for (const ProfileRow& row : summary.phases)
    if (row.name == kDataWaitSpan) summary.data_wait_share = row.host_ms / step_host_ms;
  return summary;
}

std::string format_profile_table(const std::string& title, const std::vector<ProfileRow>& rows, bool on_device, size_t max_rows) {
  const size_t shown = max_rows > 0 ? std::min(max_rows, rows.size()) : rows.size();
  size_t width = title.size();
  for (size_t i = 0; i < shown; ++i) width = std::max(width, display_name(rows[i]).size());
  std::vector<std::string> headers = {"calls"};
  if (on_device) headers.insert(headers.end(), {"device total ms", "device mean ms", "host total ms", "host mean ms"});
  else headers.insert(headers.end(), {"total ms", "mean ms"});
  headers.push_back("% of step");
  std::ostringstream out;
  out << title << std::string(width - title.size(), ' ');
  for (const std::string& h : headers) out << "  " << h;
  out << "\n";
  for (size_t i = 0; i < shown; ++i) {
    const ProfileRow& row = rows[i];
    const double calls = static_cast<double>(row.calls);
    std::vector<std::string> cells = {std::to_string(row.calls)};
    if (on_device) cells.insert(cells.end(), {fixed(row.device_ms, 2), fixed(row.device_ms / calls, 4)});
    cells.insert(cells.end(), {fixed(row.host_ms, 2), fixed(row.host_ms / calls, 4), fixed(100 * row.share, 1)});
    const std::string name = display_name(row);
    out << name << std::string(width - name.size(), ' ');
    for (size_t c = 0; c < cells.size(); ++c) out << "  " << padded_left(cells[c], headers[c].size());
    out << "\n";
  }
  if (shown < rows.size()) out << "... " << rows.size() - shown << " more rows\n";
  return out.str();
}

std::string format_profile(const ProfileSummary& summary, size_t max_rows) {
  const ProfileContext& context = summary.context;
  std::ostringstream out;
  out << "profile of steps " << context.first_step << " to " << context.first_step + summary.steps - 1 << " of the run ("
      << summary.steps << (summary.steps == 1 ? " step" : " steps") << ") on " << context.device.str() << "\n";
  out << "step: " << fixed(summary.step_ms, 2) << " ms wall clock";
  if (summary.on_device) out << ", " << fixed(summary.step_device_ms, 2) << " ms on the device";
  if (context.images_per_step > 0 && summary.step_ms > 0)
    out << "; " << fixed(1000.0 * static_cast<double>(context.images_per_step) / summary.step_ms, 1) << " img/s";
  out << "\n";
  out << "data wait: " << fixed(100 * summary.data_wait_share, 1) << "% of the step ("
      << fixed(summary.data_wait_share * summary.step_ms, 2) << " ms per step)\n";
  out << "memory (" << context.device.str() << " allocator): peak in use " << format_bytes(static_cast<double>(context.memory.peak_in_use))
      << " (the run so far), in use " << format_bytes(static_cast<double>(context.memory.in_use)) << ", reserved "
      << format_bytes(static_cast<double>(context.memory.reserved)) << "\n";
  out << "times of " << (summary.on_device ? "CUDA spans from timed events on their stream, sorted by device time"
                                            : "spans from the wall clock, sorted by total time")
      << "; a module's time includes its children's\n\n";
  out << format_profile_table("phase", summary.phases, summary.on_device, max_rows) << "\n";
  out << format_profile_table("op (kernel)", summary.ops, summary.on_device, max_rows) << "\n";
  out << format_profile_table("module", summary.modules, summary.on_device, max_rows);
  return out.str();
}

nlohmann::json profile_json(const ProfileSummary& summary) {
  const ProfileContext& context = summary.context;
  nlohmann::json doc = {{"device", context.device.str()},
                        {"first_step", context.first_step},
                        {"steps", summary.steps},
                        {"step_ms", summary.step_ms},
                        {"data_wait_share", summary.data_wait_share},
                        {"times", summary.on_device ? "cuda_events" : "wall_clock"},
                        {"memory",
                         {{"peak_in_use_bytes", context.memory.peak_in_use},
                          {"in_use_bytes", context.memory.in_use},
                          {"reserved_bytes", context.memory.reserved}}},
                        {"phases", rows_json(summary.phases, summary.on_device)},
                        {"ops", rows_json(summary.ops, summary.on_device)},
                        {"modules", rows_json(summary.modules, summary.on_device)}};
  if (summary.on_device) doc["step_device_ms"] = summary.step_device_ms;
  if (context.images_per_step > 0 && summary.step_ms > 0)
    doc["images_per_second"] = 1000.0 * static_cast<double>(context.images_per_step) / summary.step_ms;
  return doc;
}

void write_profile(const std::filesystem::path& dir, const profiler::Recording& recording, const ProfileContext& context) {
  const ProfileSummary summary = summarize_profile(recording, context);
  io::write_text_atomically(dir / "profile.txt", format_profile(summary));
  io::write_text_atomically(dir / "profile.json", json_text(profile_json(summary), 1) + "\n");
  io::write_text_atomically(dir / "trace.json", json_text(chrome_trace(recording)) + "\n");
}

}  // namespace cnn::train
