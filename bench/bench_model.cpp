// bench_model: a whole model's time per batch in three phases, median over repeats after warm-up:
//   forward           eval mode, no tape;
//   forward_backward  train mode: cross-entropy, backward, gradients dropped;
//   step              forward_backward and an SGD update (momentum 0.9, weight decay 5e-5), as
//                     cnn_train's step runs it.
// With --vs-torch, the same model, batch, size and thread count also run in PyTorch
// (bench/torch_model.py under $CNN_PYTHON, default python3), once in channels_last and once in NCHW,
// and every repeat alternates cnn's call with each PyTorch layout's so that all see the same machine
// noise; the table then shows PyTorch's times and cnn's speed over the faster layout. Without torch
// the comparison is skipped with the reason.
//
// Each timed call follows --rewarm (default 1) untimed calls of its own side. Both sides' OpenMP
// threads spin for a while after a call before they sleep (libgomp's default wait policy), so a
// call timed right after the other side's shares the two cores with those spinning threads for its
// first milliseconds: on compact_cnn's forward (10-30 ms) that made either side 20-60% slower, an
// artifact of two processes taking turns, not a cost either side has in a loop of its own. After
// one untimed call the other side's threads are asleep and the timed call sees the warm steady
// state that a training or inference loop runs in.
//
//   bench_model [--model resnet50] [--batch 8] [--size 224] [--device cpu|cuda[:N]] [--dtype f32|f16|bf16]
//               [--threads N] [--cpu-convolutions onednn|reference] [--repeats 5] [--warmup 2] [--no-train] [--vs-torch]
//               [--rewarm 1] [--json OUT]
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "engine/cnn.h"
#include "layers/registry.h"
#include "python_server.h"
#include "train/optim/param_groups.h"
#include "train/optim/sgd.h"

using namespace cnn;
using Clock = std::chrono::steady_clock;

namespace {

double median(std::vector<double> samples) {
  std::sort(samples.begin(), samples.end());
  return samples.empty() ? 0.0 : samples[samples.size() / 2];
}

// One competitor's samples of one phase.
struct Timings {
  std::string name;
  std::vector<double> seconds;
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Times a model's forward pass, backward pass and training step."};
  std::string model_name = "resnet50", json = "bench_model.json", device_text = "cpu", dtype_text = "f32";
  std::string convolutions = cpu_convolutions_name(cpu_convolutions());
  // The bench/ folder of the source tree (CMake's CNN_BENCH_DIR): where torch_model.py lives.
  std::string torch_script = (std::filesystem::path(CNN_BENCH_DIR) / "torch_model.py").string();
  int64_t batch = 8, size = 0;
  int repeats = 5, warmup = 2, threads = 0, rewarm = 1;
  bool no_train = false, vs_torch = false;
  app.add_option("--model", model_name, "model name (see cnn_summary --list)");
  app.add_option("--batch", batch, "images per pass")->check(CLI::PositiveNumber);
  app.add_option("--size", size, "input height and width (default: the model's usual size)");
  app.add_option("--device", device_text, "cpu, cuda or cuda:N");
  app.add_option("--dtype", dtype_text, "compute dtype: f32, f16 or bf16")->check(CLI::IsMember({"f32", "f16", "bf16"}));
  app.add_option("--threads", threads, "CPU threads, for cnn and PyTorch alike (0: all cores)")->check(CLI::NonNegativeNumber);
  app.add_option("--cpu-convolutions", convolutions, "f32 and bf16 CPU convolutions: onednn or reference")
      ->check(CLI::IsMember({"onednn", "reference"}));
  app.add_option("--repeats", repeats, "timed repeats (the median is reported)")->check(CLI::PositiveNumber);
  app.add_option("--warmup", warmup, "untimed calls first")->check(CLI::NonNegativeNumber);
  app.add_flag("--no-train", no_train, "time the forward pass only");
  app.add_flag("--vs-torch", vs_torch, "also run the model in PyTorch (CPU; f32, or bf16 autocast), alternating with cnn");
  app.add_option("--rewarm", rewarm, "with --vs-torch: untimed calls each side makes just before each timed one")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--torch-script", torch_script, "the PyTorch side of --vs-torch");
  app.add_option("--json", json, "JSON output file");
  CLI11_PARSE(app, argc, argv);
  try {
    const Device device = Device::parse(device_text);
    const DType dtype = parse_dtype(dtype_text);
    const ModelInfo& info = model_info(model_name);
    if (size <= 0) size = info.input_size;
    if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    set_cpu_threads(threads);
    set_cpu_convolutions(parse_cpu_convolutions(convolutions));
    auto model = make_model(model_name, info.num_classes, info.in_channels, 1);
    model->to(device);
    if (dtype != DType::f32) model->to(dtype);
    const Tensor x = Tensor::randn({batch, size, size, info.in_channels}, 2).to(device);
    std::vector<int64_t> label_values;
    for (int64_t i = 0; i < batch; ++i) label_values.push_back(i % info.num_classes);
    const Tensor labels = Tensor::from_vector(label_values, {batch}).to(device);
    const auto sync = [&] {
      if (device.is_cuda()) cuda::synchronize(device.index);
    };
    io::NamedTensors params;
    for (const NamedParameter& p : model->named_parameters()) params.emplace_back(p.name, p.tensor);
    train::ParamGroupOptions groups;
    groups.weight_decay = 5e-5;
    train::SgdOptions sgd_options;
    sgd_options.momentum = 0.9;
    train::SGD sgd(train::make_param_groups(params, groups), sgd_options);

    const auto forward_backward = [&] {
      model->train();
      Tape tape;
      Tensor loss;
      {
        Tape::Recording rec(tape);
        loss = cross_entropy(model->forward(x).to(DType::f32), labels);
      }
      tape.backward(loss);
    };
    struct Phase {
      const char* name;
      std::function<void()> run;
    };
    std::vector<Phase> phases = {{"forward",
                                  [&] {
                                    model->eval();
                                    NoGrad no_grad;
                                    model->forward(x);
                                  }}};
    if (!no_train) {
      phases.push_back({"forward_backward", [&] {
                          forward_backward();
                          model->zero_grad();
                        }});
      phases.push_back({"step", [&] {
                          forward_backward();
                          sgd.step(0.01);
                          sgd.zero_grad();
                        }});
    }

    // PyTorch, one process per layout, started before any timing.
    std::vector<std::unique_ptr<bench::PythonServer>> torch;
    std::string torch_skipped = vs_torch ? "" : "not asked for (--vs-torch)";
    if (vs_torch && (!device.is_cpu() || dtype == DType::f16)) torch_skipped = "compared on the CPU in f32 and bf16 only";
    if (torch_skipped.empty()) {
      for (const char* layout : {"channels_last", "nchw"}) {
        auto server = std::make_unique<bench::PythonServer>(
            torch_script, std::vector<std::string>{"--model", model_name, "--batch", std::to_string(batch), "--size",
                                                   std::to_string(size), "--channels", std::to_string(info.in_channels),
                                                   "--classes", std::to_string(info.num_classes), "--threads",
                                                   std::to_string(threads), "--layout", layout, "--dtype", dtype_text});
        if (!server->skipped().empty()) {
          torch_skipped = server->skipped();
          torch.clear();
          break;
        }
        torch.push_back(std::move(server));
      }
      if (!torch_skipped.empty()) std::printf("(PyTorch comparison skipped: %s)\n", torch_skipped.c_str());
    }
    const auto torch_name = [](const bench::PythonServer& s) { return "torch " + s.hello()["layout"].get<std::string>(); };

    nlohmann::json rows = nlohmann::json::array();
    std::printf("%s, batch %lld at %lldx%lld, %s, %s, %d threads (median of %d after %d warm-up)\n", model_name.c_str(),
                static_cast<long long>(batch), static_cast<long long>(size), static_cast<long long>(size),
                device.str().c_str(), dtype_text.c_str(), threads, repeats, warmup);
    std::printf("%-18s %12s", "phase", "cnn ms");
    for (const auto& s : torch) std::printf(" %20s", (torch_name(*s) + " ms").c_str());
    if (!torch.empty()) std::printf(" %18s", "cnn / best torch");
    std::printf("\n");
    for (const Phase& phase : phases) {
      std::vector<Timings> timings{{"cnn", {}}};
      for (const auto& s : torch) timings.push_back({torch_name(*s), {}});
      const auto once = [&](size_t who) {
        if (who == 0) {
          const Clock::time_point start = Clock::now();
          phase.run();
          sync();
          return std::chrono::duration<double>(Clock::now() - start).count();
        }
        return torch[who - 1]->request(phase.name)["seconds"].get<double>();
      };
      for (int i = 0; i < warmup; ++i)
        for (size_t who = 0; who < timings.size(); ++who) once(who);
      for (int r = 0; r < repeats; ++r)
        for (size_t who = 0; who < timings.size(); ++who) {
          if (timings.size() > 1)
            for (int k = 0; k < rewarm; ++k) once(who);
          timings[who].seconds.push_back(once(who));
        }

      nlohmann::json row = {{"phase", phase.name}};
      const double ours = median(timings[0].seconds);
      std::printf("%-18s %12.1f", phase.name, ours * 1e3);
      double best_torch = 0;
      for (const Timings& t : timings) {
        const double m = median(t.seconds);
        row[t.name + " seconds"] = m;
        row[t.name + " samples"] = t.seconds;
        if (&t == &timings[0]) continue;
        std::printf(" %20.1f", m * 1e3);
        if (best_torch == 0 || m < best_torch) best_torch = m;
      }
      if (best_torch > 0) {
        row["speed vs best torch"] = best_torch / ours;
        std::printf(" %17.2fx", best_torch / ours);
      }
      std::printf("\n");
      rows.push_back(row);
    }
    nlohmann::json doc = {{"benchmark", "bench_model"}, {"model", model_name}, {"batch", batch},  {"size", size},
                          {"device", device.str()},     {"dtype", dtype_text},  {"threads", threads},
                          {"repeats", repeats},         {"warmup", warmup},     {"rewarm", rewarm},     {"phases", rows},
                          {"cpu_convolutions", cpu_convolutions_name(cpu_convolutions())}};
    if (!torch.empty()) doc["torch"] = torch[0]->hello();
    else doc["torch_skipped"] = torch_skipped;
    std::ofstream(json) << doc.dump(2) << "\n";
    std::printf("wrote %s\n", json.c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_model: %s\n", e.what());
    return 1;
  }
  return 0;
}
