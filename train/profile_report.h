// What a profiler recording of training steps says, as people and programs read it: the step time,
// the data-wait share, the allocator's memory, and tables by phase, by op (kernel) and by module
// (calls, total and mean time, share of the step), like torch.profiler's
// key_averages().table(sort_by="cuda_time_total"): on a GPU the rows are sorted by device time
// (from timed CUDA events) and show host time beside it; on the CPU by wall-clock time.
//
// Only spans inside a "step" span (profile_window.h) count in the tables, so work between the
// profiled steps (an epoch's validation) stays out. write_profile writes profile.txt (the tables),
// profile.json (the same numbers) and trace.json (chrome_trace.h) into a run folder.
#pragma once
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/allocator.h"
#include "engine/device.h"
#include "engine/profiler.h"

namespace cnn::train {

// What the recording itself does not know.
struct ProfileContext {
  Device device = Device::cpu();  // the training device
  int64_t first_step = 1;         // number of the first recorded step (in the run, from 1)
  int64_t images_per_step = 0;    // for images/s (0: not shown)
  AllocatorStats memory;          // of the training device's allocator, at the end of the recording
};

// A row of a table: the spans of one name (of one category) summed.
struct ProfileRow {
  std::string name;
  std::string type;  // modules: the module's type
  int64_t calls = 0;
  double host_ms = 0;    // total host (wall-clock) time
  double device_ms = 0;  // total device time of CUDA spans (0 on the CPU)
  double share = 0;      // of the step time: device time on a GPU, wall clock on the CPU
};

struct ProfileSummary {
  ProfileContext context;
  int64_t steps = 0;
  double step_ms = 0;         // mean wall-clock time of a step
  double step_device_ms = 0;  // mean device time of a step (GPU)
  double data_wait_share = 0;  // of the step's wall clock: waiting for the loader
  bool on_device = false;      // times from CUDA events
  std::vector<ProfileRow> phases, ops, modules;  // each sorted by its main time, largest first
};

ProfileSummary summarize_profile(const profiler::Recording& recording, const ProfileContext& context);

// profile.txt: a header, then the phase, op and module tables; `max_rows` rows of each (0: all).
std::string format_profile(const ProfileSummary& summary, size_t max_rows = 0);
// The op table alone (what bench_train prints).
std::string format_profile_table(const std::string& title, const std::vector<ProfileRow>& rows, bool on_device, size_t max_rows);
// profile.json: the same numbers.
nlohmann::json profile_json(const ProfileSummary& summary);

// profile.txt, profile.json and trace.json in `dir`, each written atomically.
void write_profile(const std::filesystem::path& dir, const profiler::Recording& recording, const ProfileContext& context);

}  // namespace cnn::train
