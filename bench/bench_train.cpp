// bench_train: the whole training step as cnn_train runs it, in images per second and ms per step:
// the loader (its workers and the training transforms, on synthetic images kept in memory), the
// upload, forward and backward (train/train_step.h), the unscale and inf/nan check, loss scaling
// with fp16, and the optimizer update, through the trainer's own learner. The steps are timed
// once without the profiler (the figures) and once with it, for a table of the time per op,
// phase and module (from CUDA events on a GPU, the wall clock on the CPU: train/profile_report.h).
// With --cuda-graphs the timed steps replay the step captured after the warm-up
// (train/step_graph.h, as [train] cuda_graphs); the profiled ones run eagerly, as in cnn_train.
//
//   bench_train [--model resnet50] [--batch 32] [--image-size 224] [--precision fp32|bf16|fp16]
//               [--device cpu|cuda[:N]] [--steps 10] [--warmup 3] [--workers 2] [--threads 0]
//               [--cuda-graphs] [--rows 15] [--json bench_train.json]
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "data/array_dataset.h"
#include "engine/cnn.h"
#include "engine/profiler.h"
#include "layers/registry.h"
#include "train/config/config.h"
#include "train/distributed/data_parallel.h"
#include "train/learner.h"
#include "train/log/console.h"
#include "train/profile_report.h"
#include "train/profile_window.h"
#include "train/run_log.h"
#include "train/step_graph.h"
#include "train/train_settings.h"
#include "train/train_step.h"
#include "train/training_data.h"

using namespace cnn;
using Clock = std::chrono::steady_clock;

namespace {

struct Options {
  std::string model = "resnet50", precision = "fp32", device = "cpu", json = "bench_train.json";
  std::string cpu_convolutions = "auto";
  int64_t batch = 32, image_size = 0;
  int steps = 10, warmup = 3, workers = 2, threads = 0;
  bool cuda_graphs = false;
  size_t rows = 15;
};

// The settings cnn_train would read from a config of this model, batch and precision (the loader's
// default training transforms: a random resized crop and a flip).
train::TrainSettings settings_for(const Options& o, const ModelInfo& info) {
  std::string mean, std;
  for (int c = 0; c < info.in_channels; ++c) {
    mean += std::string(c ? ", " : "") + "0.5";
    std += std::string(c ? ", " : "") + "0.25";
  }
  const std::vector<std::string> keys = {
      "model.name=" + o.model, "model.num_classes=" + std::to_string(info.num_classes), "model.in_channels=" + std::to_string(info.in_channels),
      "data.path=synthetic",  // never opened: the images are made here
      "data.batch_size=" + std::to_string(o.batch), "data.image_size=" + std::to_string(o.image_size), "data.workers=" + std::to_string(o.workers),
      "data.mean=" + mean, "data.std=" + std, "precision.mode=" + o.precision, "train.device=" + o.device,
      "train.threads=" + std::to_string(o.threads), "train.cpu_convolutions=" + o.cpu_convolutions, "log.level=quiet",
      std::string("train.cuda_graphs=") + (o.cuda_graphs ? "true" : "false")};
  return train::from_config(train::Config::parse("", "bench_train", keys));
}

// Random pixels, `batches` batches of them (the loader cycles through them epoch after epoch).
data::DatasetPtr synthetic_images(const Options& o, const ModelInfo& info, int64_t batches) {
  const int64_t count = o.batch * batches;
  std::vector<uint8_t> pixels(static_cast<size_t>(count * o.image_size * o.image_size * info.in_channels));
  uint32_t state = 7;
  for (uint8_t& p : pixels) p = static_cast<uint8_t>((state = state * 1664525u + 1013904223u) >> 24);
  std::vector<int64_t> labels;
  for (int64_t i = 0; i < count; ++i) labels.push_back(i % info.num_classes);
  std::vector<std::string> names;
  for (int k = 0; k < info.num_classes; ++k) names.push_back(std::to_string(k));
  return std::make_shared<data::ArrayDataset>(Tensor::from_vector(pixels, {count, o.image_size, o.image_size, info.in_channels}),
                                              labels, names, "synthetic images");
}

// The training loop of cnn_train reduced to its steps: the loader's next batch (its wait a span,
// as in the trainer), the upload, forward and backward, the optimizer step.
class TrainingSteps {
 public:
  TrainingSteps(const train::TrainSettings& settings, train::TrainingData& data, train::Learner& learner)
      : settings_(settings), data_(data), learner_(learner), single_process_(settings) {
    data_.train_loader->start_epoch(epoch_);
    if (settings.loop.graphs) {
      const std::string obstacle = train::step_graph_obstacle(settings, 1);
      CNN_CHECK(obstacle.empty(), "--cuda-graphs: the step cannot be captured: ", obstacle);
      graph_ = std::make_unique<train::StepGraph>(learner, settings, single_process_);
    }
  }

  // `count` steps; `window` (may be null) is told where each starts and ends.
  void run(int count, train::ProfileWindow* window) {
    const Device& device = settings_.compute.device;
    for (int i = 0; i < count; ++i) {
      if (window) window->step_starts();
      const data::Batch batch = next_batch();
      train::MicroBatch micro_batch;
      {
        const profiler::Scope span("input upload", profiler::Category::phase, device);
        micro_batch = {.images = data_.images_on_device(batch, device, epoch_, ++index_), .labels = batch.labels.to(device),
                       .epoch = epoch_, .index = index_, .reducer = nullptr};
      }
      // After an eager step (the optimizer's state, cuDNN's choices), unprofiled steps replay the graph.
      if (graph_ && !window && step_ > 0 && graph_->fits(micro_batch) && graph_->prepare(micro_batch, step_)) {
        graph_->replay(micro_batch, step_++);
      } else {
        train::forward_backward(learner_, micro_batch, settings_);
        train::optimizer_step(learner_, step_++, settings_.optim.clip_grad_norm, {}, single_process_);
      }
      if (window) recording_ = window->step_ends();
    }
  }
  void synchronize() const {
    if (settings_.compute.device.is_cuda()) cuda::synchronize(settings_.compute.device.index);
  }
  const std::optional<profiler::Recording>& recording() const { return recording_; }

 private:
  data::Batch next_batch() {
    const profiler::Scope wait("data wait", profiler::Category::phase, Device::cpu());
    for (;;) {
      if (std::optional<data::Batch> batch = data_.train_loader->next(); batch && batch->size() > 0) return std::move(*batch);
      data_.train_loader->start_epoch(++epoch_);
      index_ = 0;
    }
  }

  const train::TrainSettings& settings_;
  train::TrainingData& data_;
  train::Learner& learner_;
  train::DataParallel single_process_;
  std::unique_ptr<train::StepGraph> graph_;  // --cuda-graphs
  int64_t epoch_ = 0, index_ = 0, step_ = 0;
  std::optional<profiler::Recording> recording_;
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Times cnn_train's whole training step on synthetic data, with a profile of it."};
  Options o;
  app.add_option("--model", o.model, "model name (see cnn_summary --list)");
  app.add_option("--batch", o.batch, "images per step")->check(CLI::PositiveNumber);
  app.add_option("--image-size", o.image_size, "input height and width (default: the model's usual size)");
  app.add_option("--precision", o.precision, "compute dtype of activations")->check(CLI::IsMember({"fp32", "bf16", "fp16"}));
  app.add_option("--device", o.device, "cpu, cuda or cuda:N");
  app.add_option("--steps", o.steps, "timed steps (and as many profiled ones)")->check(CLI::PositiveNumber);
  app.add_option("--warmup", o.warmup, "untimed steps first")->check(CLI::NonNegativeNumber);
  app.add_option("--workers", o.workers, "loader worker threads ([data] workers)")->check(CLI::NonNegativeNumber);
  app.add_option("--threads", o.threads, "CPU threads of the CPU backend (0: all cores)")->check(CLI::NonNegativeNumber);
  app.add_option("--cpu-convolutions", o.cpu_convolutions, "f32 and bf16 CPU convolutions: auto, onednn or reference ([train] cpu_convolutions)");
  app.add_flag("--cuda-graphs", o.cuda_graphs, "timed steps replay the step captured after the warm-up ([train] cuda_graphs)");
  app.add_option("--rows", o.rows, "rows of each table shown (profile.json-like output in --json has all)");
  app.add_option("--json", o.json, "JSON output file");
  CLI11_PARSE(app, argc, argv);
  try {
    const ModelInfo& info = model_info(o.model);
    if (o.image_size <= 0) o.image_size = info.input_size;
    CNN_CHECK(!o.cuda_graphs || o.warmup >= 1, "--cuda-graphs needs --warmup of at least 1 (an eager step before the capture)");
    const train::TrainSettings settings = settings_for(o, info);
    const Device& device = settings.compute.device;
    train::configure_backend(settings.compute);
    train::Console console(std::cerr, train::LogLevel::quiet, train::ProgressMode::lines, false);
    train::RunLog log(console, {});
    train::TrainingData data = train::open_training_data(settings, log, synthetic_images(o, info, 4));
    train::Learner learner = train::build_learner(settings, data.steps_per_epoch, log);
    TrainingSteps steps(settings, data, learner);

    steps.run(o.warmup, nullptr);
    steps.synchronize();
    const Clock::time_point start = Clock::now();
    steps.run(o.steps, nullptr);
    steps.synchronize();
    const double ms_per_step = std::chrono::duration<double, std::milli>(Clock::now() - start).count() / o.steps;
    const double images_per_second = 1000.0 * static_cast<double>(o.batch) / ms_per_step;

    train::ProfileWindow window(0, o.steps, device);
    steps.run(o.steps, &window);
    const train::ProfileContext context{.device = device,
                                        .first_step = o.warmup + o.steps + 1,
                                        .images_per_step = o.batch,
                                        .memory = device.is_cuda() ? cuda_allocator(device.index).stats() : cpu_allocator().stats()};
    const train::ProfileSummary profile = train::summarize_profile(*steps.recording(), context);

    std::printf("bench_train: %s, batch %lld at %lldx%lld, %s, %s%s: %.2f ms/step = %.1f img/s (%d steps after %d warm-up; %d loader workers)\n",
                o.model.c_str(), static_cast<long long>(o.batch), static_cast<long long>(o.image_size), static_cast<long long>(o.image_size),
                device.str().c_str(), o.precision.c_str(), o.cuda_graphs ? ", graph replays" : "", ms_per_step, images_per_second,
                o.steps, o.warmup, o.workers);
    std::printf("profiled: %.2f ms/step", profile.step_ms);
    if (profile.on_device) std::printf(", %.2f ms on the device", profile.step_device_ms);
    std::printf(", data wait %.1f%% (%s)\n\n", 100 * profile.data_wait_share,
                profile.on_device ? "times from CUDA events" : "wall-clock times");
    std::fputs(train::format_profile_table("phase", profile.phases, profile.on_device, o.rows).c_str(), stdout);
    std::fputs("\n", stdout);
    std::fputs(train::format_profile_table("op (kernel)", profile.ops, profile.on_device, o.rows).c_str(), stdout);
    const nlohmann::json doc = {{"benchmark", "bench_train"},
                                {"model", o.model},
                                {"batch", o.batch},
                                {"image_size", o.image_size},
                                {"device", device.str()},
                                {"precision", o.precision},
                                {"steps", o.steps},
                                {"warmup", o.warmup},
                                {"workers", o.workers},
                                {"cuda_graphs", o.cuda_graphs},
                                {"ms_per_step", ms_per_step},
                                {"images_per_second", images_per_second},
                                {"profile", train::profile_json(profile)}};
    std::ofstream(o.json) << doc.dump(2) << "\n";
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_train: %s\n", e.what());
    return 1;
  }
  return 0;
}
