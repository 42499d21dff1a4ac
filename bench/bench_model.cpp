// bench_model: time of a whole model's forward pass (eval mode, no tape) and of a training step
// (forward and backward in train mode), median over repeats after warm-up, in images per second.
//
//   bench_model [--model resnet50] [--batch 8] [--size 224] [--device cpu|cuda[:N]] [--dtype f32|f16|bf16]
//               [--repeats 3] [--warmup 1] [--no-train] [--json OUT]
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/cnn.h"
#include "layers/registry.h"
#include "median_time.h"

using namespace cnn;
using cnn::bench::median_seconds;

int main(int argc, char** argv) {
  CLI::App app{"Times a model's forward pass and training step."};
  std::string model_name = "resnet50", json = "bench_model.json", device_text = "cpu", dtype_text = "f32";
  int64_t batch = 8, size = 0;
  int repeats = 3, warmup = 1;
  bool no_train = false;
  app.add_option("--model", model_name, "model name (see cnn_summary --list)");
  app.add_option("--batch", batch, "images per pass")->check(CLI::PositiveNumber);
  app.add_option("--size", size, "input height and width (default: the model's usual size)");
  app.add_option("--device", device_text, "cpu, cuda or cuda:N");
  app.add_option("--dtype", dtype_text, "compute dtype: f32, f16 or bf16")->check(CLI::IsMember({"f32", "f16", "bf16"}));
  app.add_option("--repeats", repeats, "timed repeats (the median is reported)")->check(CLI::PositiveNumber);
  app.add_option("--warmup", warmup, "untimed calls first")->check(CLI::NonNegativeNumber);
  app.add_flag("--no-train", no_train, "time the forward pass only");
  app.add_option("--json", json, "JSON output file");
  CLI11_PARSE(app, argc, argv);
  try {
    const Device device = Device::parse(device_text);
    const DType dtype = parse_dtype(dtype_text);
    const ModelInfo& info = model_info(model_name);
    if (size <= 0) size = info.input_size;
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

    model->eval();
    const double forward = median_seconds(
        [&] {
          NoGrad no_grad;
          model->forward(x);
        },
        sync, warmup, repeats);
    double train_step = 0;
    if (!no_train) {
      model->train();
      train_step = median_seconds(
          [&] {
            Tape tape;
            Tensor loss;
            {
              Tape::Recording rec(tape);
              loss = cross_entropy(model->forward(x).to(DType::f32), labels);
            }
            tape.backward(loss);
            model->zero_grad();
          },
          sync, warmup, repeats);
    }
    const auto per_second = [&](double s) { return s > 0 ? static_cast<double>(batch) / s : 0.0; };
    std::printf("%s, batch %lld at %lldx%lld, %s, %s: forward (eval) %.1f ms = %.1f img/s", model_name.c_str(),
                static_cast<long long>(batch), static_cast<long long>(size), static_cast<long long>(size),
                device.str().c_str(), dtype_text.c_str(), forward * 1e3, per_second(forward));
    if (!no_train) std::printf("; training step %.1f ms = %.1f img/s", train_step * 1e3, per_second(train_step));
    std::printf(" (median of %d after %d warm-up)\n", repeats, warmup);
    const nlohmann::json doc = {{"benchmark", "bench_model"}, {"model", model_name},      {"batch", batch},
                                {"size", size},               {"device", device.str()},   {"dtype", dtype_text},
                                {"forward_seconds", forward}, {"train_step_seconds", train_step},
                                {"repeats", repeats}};
    std::ofstream(json) << doc.dump(2) << "\n";
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_model: %s\n", e.what());
    return 1;
  }
  return 0;
}
