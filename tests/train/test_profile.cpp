// [log] profile_steps: a short run writes profile.txt, profile.json and trace.json; the table's step
// time is the run's own; only the profiled steps count (not a validation between them); the trace
// parses and nests. And the pieces: module spans named by their paths, the summary of a recording
// made by hand on the CPU and on a GPU, the config keys.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "engine/cnn.h"
#include "engine/profiler.h"
#include "layers/registry.h"
#include "train/config/config.h"
#include "train/profile_report.h"
#include "train/small_run.h"
#include "train/trainer.h"

using namespace cnn;
using namespace cnn::train;
using namespace cnn::train::testing;
using nlohmann::json;

namespace {
json read_json(const std::filesystem::path& path) {
  std::ifstream in(path);
  REQUIRE_MESSAGE(in.good(), "cannot read " << path);
  return json::parse(in);  // throws on anything that is not JSON
}

std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

const json* row_named(const json& rows, const std::string& name) {
  for (const json& row : rows)
    if (row["name"] == name) return &row;
  return nullptr;
}

// Checks that the complete events of each trace row nest: any two are disjoint or one holds the
// other, and every event that had an enclosing span (depth > 0) lies inside another event of its
// row. Returns how many events lie inside another.
int check_trace_nests(const json& trace) {
  struct Event {
    double start, end;
    int depth;
    std::string name;
  };
  std::map<std::pair<int, int>, std::vector<Event>> rows;
  for (const json& e : trace["traceEvents"]) {
    if (e["ph"] != "X") continue;
    REQUIRE(e.contains("name"));
    REQUIRE(e.contains("cat"));
    const double ts = e["ts"], dur = e["dur"];
    CHECK(dur >= 0);
    rows[{e["pid"].get<int>(), e["tid"].get<int>()}].push_back({ts, ts + dur, e["args"]["depth"].get<int>(), e["name"]});
  }
  constexpr double kRounding = 1e-3;  // microseconds: the JSON's decimal doubles
  int nested = 0;
  for (auto& [row, events] : rows) {
    std::sort(events.begin(), events.end(), [](const Event& a, const Event& b) { return a.start < b.start || (a.start == b.start && a.end > b.end); });
    std::vector<const Event*> open;  // the events holding the current one, innermost last
    for (const Event& e : events) {
      while (!open.empty() && open.back()->end <= e.start + kRounding) open.pop_back();
      if (!open.empty()) {
        CHECK_MESSAGE(e.end <= open.back()->end + kRounding,
                      e.name << " [" << e.start << ", " << e.end << "] overlaps " << open.back()->name << " [" << open.back()->start << ", "
                             << open.back()->end << "] without nesting in it");
        ++nested;
      } else {
        CHECK_MESSAGE(e.depth == 0, e.name << " at depth " << e.depth << " lies inside no other event of its row");
      }
      open.push_back(&e);
    }
  }
  return nested;
}

profiler::Span span_at(const std::string& name, profiler::Category category, double start_us, double end_us) {
  profiler::Span s;
  s.name = name;
  s.category = category;
  s.host_start_us = start_us;
  s.host_end_us = end_us;
  return s;
}
}  // namespace

TEST_CASE("profile: a run with [log] profile_steps writes the three files, and the step time is the run's own") {
  SmallRun run("profile", 256, 64, 1, 2);
  // 8 steps in the one epoch: steps 3 to 6 are profiled, far from its start and end.
  std::vector<std::chrono::steady_clock::time_point> at_step;
  run.opts.on_gradients = [&](int64_t, const std::vector<Tensor>&) { at_step.push_back(std::chrono::steady_clock::now()); };
  const TrainSummary summary = run_training(
      Config::parse(run.text, "test.ini", {"train.epochs=1", "log.profile_warmup=2", "log.profile_steps=4", "log.every_steps=1000"}), run.opts);
  REQUIRE(at_step.size() == 8);
  for (const char* file : {"profile.txt", "profile.json", "trace.json"})
    CHECK_MESSAGE(std::filesystem::exists(summary.run_dir / file), file);

  const json profile = read_json(summary.run_dir / "profile.json");
  CHECK(profile["steps"] == 4);
  CHECK(profile["first_step"] == 3);
  CHECK(profile["device"] == "cpu");
  CHECK(profile["times"] == "wall_clock");
  // The gradient hook runs once in each step (at_step[k] in step k + 1). The four profiled steps run
  // back to back, so they hold the time from the hook of step 3 to that of step 6 (less the loop's few
  // instructions between steps) and lie inside the time from the hook of step 2 to that of step 7.
  // Bounds rather than a tolerance: they hold however busy the machine is.
  const auto ms = [&](int from, int to) { return std::chrono::duration<double, std::milli>(at_step[to] - at_step[from]).count(); };
  const double table_ms = 4 * profile["step_ms"].get<double>();
  MESSAGE("4 steps: " << table_ms << " ms in the profile; hooks of steps 3 to 6 " << ms(2, 5) << " ms, of steps 2 to 7 " << ms(1, 6)
                      << " ms");
  CHECK(table_ms <= ms(1, 6));
  CHECK(table_ms >= 0.98 * ms(2, 5));

  const json& phases = profile["phases"];
  for (const char* phase : {"step", "data wait", "input upload", "forward", "backward", "unscale", "optimizer step"})
    CHECK_MESSAGE(row_named(phases, phase) != nullptr, "no phase " << phase);
  CHECK((*row_named(phases, "step"))["share_of_step"].get<double>() == doctest::Approx(1.0));
  CHECK((*row_named(phases, "forward"))["calls"] == 4);
  const double wait = profile["data_wait_share"];
  CHECK(wait >= 0);
  CHECK(wait < 1);
  CHECK(wait == doctest::Approx((*row_named(phases, "data wait"))["share_of_step"].get<double>()));
  // Kernels do not nest in one another: their times add up to less than the steps'.
  double op_share = 0;
  for (const json& op : profile["ops"]) op_share += op["share_of_step"].get<double>();
  CHECK(op_share > 0.2);
  CHECK(op_share < 1.0);
  const json* conv = row_named(profile["ops"], "conv2d_forward");
  REQUIRE(conv != nullptr);
  CHECK((*conv)["calls"] == 8);  // two convolutions in each of 4 steps
  const json* first_conv = row_named(profile["modules"], "features.0");
  REQUIRE(first_conv != nullptr);
  CHECK((*first_conv)["type"] == "Conv2d");
  CHECK((*first_conv)["calls"] == 4);
  CHECK(row_named(profile["modules"], "CompactCNN") != nullptr);
  CHECK(profile["memory"]["peak_in_use_bytes"].get<double>() > 0);

  const std::string table = read_text(summary.run_dir / "profile.txt");
  CHECK(table.find("profile of steps 3 to 6 of the run (4 steps) on cpu") != std::string::npos);
  CHECK(table.find("conv2d_forward") != std::string::npos);
  CHECK(table.find("features.0 (Conv2d)") != std::string::npos);
  CHECK(table.find("data wait: ") != std::string::npos);
  CHECK(table.find("peak in use") != std::string::npos);

  const json trace = read_json(summary.run_dir / "trace.json");
  int steps = 0;
  std::set<std::string> categories;
  for (const json& e : trace["traceEvents"]) {
    if (e["ph"] == "X") categories.insert(e["cat"].get<std::string>());
    if (e["ph"] == "X" && e["name"] == "step") ++steps;
  }
  CHECK(steps == 4);
  CHECK(categories == std::set<std::string>{"op", "module", "phase"});
  CHECK(check_trace_nests(trace) > 100);
}

TEST_CASE("profile: only the profiled steps count, not the validation between them, a run that ends first writes what it had") {
  SmallRun run("profile_epochs", 128, 64, 1, 2);
  // 4 steps an epoch, 3 epochs: steps 4 to 7 are profiled, with the end of epoch 1 (and its
  // validation) between steps 4 and 5.
  const TrainSummary summary =
      run_training(Config::parse(run.text, "test.ini", {"train.epochs=3", "log.profile_warmup=3", "log.profile_steps=4"}), run.opts);
  const json profile = read_json(summary.run_dir / "profile.json");
  CHECK(profile["steps"] == 4);
  CHECK((*row_named(profile["ops"], "conv2d_forward"))["calls"] == 8);   // the validation's are left out
  CHECK((*row_named(profile["modules"], "CompactCNN"))["calls"] == 4);

  SmallRun short_run("profile_short", 128, 64, 1, 2);  // 4 steps in all: 2 of the 10 wanted
  const TrainSummary ended = run_training(
      Config::parse(short_run.text, "test.ini", {"train.epochs=1", "log.profile_warmup=2", "log.profile_steps=10"}), short_run.opts);
  const json partial = read_json(ended.run_dir / "profile.json");
  CHECK(partial["steps"] == 2);
  CHECK(partial["first_step"] == 3);
  // Off by default: no profile at all.
  SmallRun plain("profile_off", 128, 64, 1, 2);
  const TrainSummary off = run_training(Config::parse(plain.text, "test.ini", {"train.epochs=1"}), plain.opts);
  CHECK(!std::filesystem::exists(off.run_dir / "profile.json"));
  CHECK(!profiler::enabled());
}

TEST_CASE("profile: module spans are named by the module's path, batch norms called by their blocks included") {
  auto model = make_model("resnet18", 10, 3, 1);
  model->eval();
  const Tensor x = Tensor::randn({1, 32, 32, 3}, 2);
  // The reference convolutions, so that every convolution runs as its own module: with oneDNN the
  // eval forward folds each BatchNorm into its convolution, one op in the BatchNorm's span.
  const CpuConvolutions before = cpu_convolutions();
  set_cpu_convolutions(CpuConvolutions::reference);
  profiler::start();
  {
    NoGrad no_grad;
    model->forward(x);
  }
  const profiler::Recording recording = profiler::stop();
  set_cpu_convolutions(before);
  std::map<std::string, const profiler::Span*> modules;
  for (const profiler::Span& s : recording.spans)
    if (s.category == profiler::Category::module) modules[s.name] = &s;
  for (const char* path : {"ResNet", "conv1", "bn1", "layer1", "layer1.0", "layer1.0.conv1", "layer1.0.bn1", "layer1.0.bn2", "layer2.0.downsample.0", "fc"})
    CHECK_MESSAGE(modules.count(path) == 1, "no span for module " << path);
  REQUIRE(modules.count("layer1.0.bn1") == 1);
  const profiler::Span& bn = *modules["layer1.0.bn1"];
  CHECK(bn.type == "BatchNorm2d");
  CHECK(bn.depth == 3);  // ResNet > layer1 > layer1.0 > bn1
  CHECK(recording.spans.at(static_cast<size_t>(bn.parent)).name == "layer1.0");
  CHECK(modules["ResNet"]->depth == 0);
}

TEST_CASE("profile: the summary counts the spans inside steps, with shares of the step, by wall clock on the CPU") {
  profiler::Recording recording;
  recording.threads = 1;
  recording.spans = {span_at("step", profiler::Category::phase, 0, 100), span_at("data wait", profiler::Category::phase, 0, 10),
                     span_at("conv", profiler::Category::op, 20, 50),    span_at("relu", profiler::Category::op, 50, 60),
                     span_at("step", profiler::Category::phase, 200, 300), span_at("conv", profiler::Category::op, 210, 240),
                     span_at("conv", profiler::Category::op, 120, 180)};  // between the steps: left out
  const ProfileSummary summary = summarize_profile(recording, {.device = Device::cpu(), .first_step = 7, .images_per_step = 32, .memory = {}});
  CHECK(summary.steps == 2);
  CHECK(summary.step_ms == doctest::Approx(0.1));
  CHECK(summary.data_wait_share == doctest::Approx(0.05));
  REQUIRE(summary.ops.size() == 2);
  CHECK(summary.ops[0].name == "conv");  // the largest first
  CHECK(summary.ops[0].calls == 2);
  CHECK(summary.ops[0].host_ms == doctest::Approx(0.06));
  CHECK(summary.ops[0].share == doctest::Approx(0.3));
  CHECK(summary.ops[1].name == "relu");
  const std::string text = format_profile(summary);
  CHECK(text.find("profile of steps 7 to 8 of the run (2 steps) on cpu") != std::string::npos);
  CHECK(text.find("320000.0 img/s") != std::string::npos);
  CHECK(text.find("device total ms") == std::string::npos);
}

TEST_CASE("profile: on a GPU the rows are sorted by device time and show host time beside it") {
  profiler::Recording recording;
  recording.threads = 1;
  auto on_gpu = [](profiler::Span s, double device_start, double device_end) {
    s.device = Device::cuda(0);
    s.device_start_us = device_start;
    s.device_end_us = device_end;
    return s;
  };
  // The launch of "gemm" is quick on the host and long on the device; "copy" the other way round.
  recording.spans = {on_gpu(span_at("step", profiler::Category::phase, 0, 1000), 0, 2000),
                     on_gpu(span_at("gemm", profiler::Category::op, 10, 20), 10, 1510),
                     on_gpu(span_at("copy", profiler::Category::op, 30, 530), 1510, 1610)};
  const ProfileSummary summary = summarize_profile(recording, {.device = Device::cuda(0), .first_step = 1, .images_per_step = 0, .memory = {}});
  CHECK(summary.on_device);
  CHECK(summary.step_device_ms == doctest::Approx(2.0));
  REQUIRE(summary.ops.size() == 2);
  CHECK(summary.ops[0].name == "gemm");
  CHECK(summary.ops[0].share == doctest::Approx(0.75));
  CHECK(summary.ops[1].host_ms == doctest::Approx(0.5));
  const std::string text = format_profile(summary);
  CHECK(text.find("device total ms") != std::string::npos);
  CHECK(text.find("sorted by device time") != std::string::npos);
  const json doc = profile_json(summary);
  CHECK(doc["times"] == "cuda_events");
  CHECK(doc["ops"][0]["device_total_ms"].get<double>() == doctest::Approx(1.5));
}

TEST_CASE("profile: [log] profile_steps is checked like every key: a misspelling is refused with the right name") {
  const std::string text = "[model]\nname = compact_cnn\n[data]\npath = x\n[log]\nprofile_step = 3\n";
  CHECK_THROWS_WITH_AS(Config::parse(text, "test.ini"), doctest::Contains("profile_steps"), Error);
  CHECK_THROWS_WITH_AS(Config::parse("[log]\nprofile_steps = -1\n", "test.ini"), doctest::Contains("profile_steps"), Error);
}
