// bench_checkpointing: peak memory and step time of a training step with and without gradient
// checkpointing of blocks (the trainer's train.checkpointing = blocks).
//
//   bench_checkpointing [--model resnet50] [--batch 8] [--size 224] [--device cpu|cuda[:N]] [--steps 2]
//                       [--json OUT]
//
// Peak memory is the device allocator's peak of bytes in use during the steps, above what was in
// use before them (parameters and their gradients included, as they are in training).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "engine/cnn.h"
#include "layers/registry.h"

using namespace cnn;

namespace {
struct Measurement {
  double seconds_per_step = 0;
  size_t peak_bytes = 0;
};

Measurement measure(Module& model, const Tensor& x, const Tensor& labels, bool checkpointing, int steps,
                    const Device& device) {
  model.set_gradient_checkpointing(checkpointing);
  Allocator& alloc = device.is_cuda() ? cuda_allocator(device.index) : cpu_allocator();
  auto step = [&] {
    Tape tape;
    Tensor loss;
    {
      Tape::Recording rec(tape);
      loss = cross_entropy(model.forward(x), labels);
    }
    tape.backward(loss);
    if (device.is_cuda()) cuda::synchronize(device.index);
  };
  step();  // warm-up: allocates the gradients, chooses algorithms
  model.zero_grad();
  step();
  const size_t base = alloc.stats().in_use;
  alloc.reset_peak();
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < steps; ++i) step();
  Measurement m;
  m.seconds_per_step = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / steps;
  m.peak_bytes = alloc.stats().peak_in_use - std::min(base, alloc.stats().peak_in_use);
  model.zero_grad();
  return m;
}
}  // namespace

int main(int argc, char** argv) {
  std::string model_name = "resnet50", json = "bench_checkpointing.json";
  int64_t batch = 8, size = 224;
  int steps = 2;
  Device device;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--model") model_name = value;
    else if (flag == "--batch") batch = std::stoll(value);
    else if (flag == "--size") size = std::stoll(value);
    else if (flag == "--device") device = Device::parse(value);
    else if (flag == "--steps") steps = std::max(1, std::stoi(value));
    else if (flag == "--json") json = value;
    else {
      std::fprintf(stderr, "bench_checkpointing: unknown option %s\n", flag.c_str());
      return 2;
    }
  }
  try {
    const ModelInfo& info = model_info(model_name);
    auto model = make_model(model_name, info.num_classes, info.in_channels, 0);
    model->to(device);
    model->train();
    const Tensor x = Tensor::randn({batch, size, size, info.in_channels}, 1, DType::f32, device);
    const Tensor labels = Tensor::zeros({batch}, DType::i64, device);
    const Measurement plain = measure(*model, x, labels, false, steps, device);
    const Measurement blocks = measure(*model, x, labels, true, steps, device);
    std::printf("%s, batch %lld at %lldx%lld on %s\n", model_name.c_str(), static_cast<long long>(batch),
                static_cast<long long>(size), static_cast<long long>(size), device.str().c_str());
    std::printf("%-14s %14s %14s\n", "checkpointing", "peak MiB", "s/step");
    std::printf("%-14s %14.1f %14.3f\n", "none", plain.peak_bytes / 1048576.0, plain.seconds_per_step);
    std::printf("%-14s %14.1f %14.3f\n", "blocks", blocks.peak_bytes / 1048576.0, blocks.seconds_per_step);
    std::printf("peak memory x%.2f, time x%.2f\n", static_cast<double>(blocks.peak_bytes) / std::max<size_t>(plain.peak_bytes, 1),
                blocks.seconds_per_step / plain.seconds_per_step);
    const nlohmann::json doc = {{"benchmark", "bench_checkpointing"}, {"model", model_name}, {"batch", batch},
                                {"size", size}, {"device", device.str()},
                                {"none", {{"peak_bytes", plain.peak_bytes}, {"seconds_per_step", plain.seconds_per_step}}},
                                {"blocks", {{"peak_bytes", blocks.peak_bytes}, {"seconds_per_step", blocks.seconds_per_step}}}};
    std::ofstream(json) << doc.dump(2) << "\n";
  } catch (const Error& e) {
    std::fprintf(stderr, "bench_checkpointing: %s\n", e.what());
    return 1;
  }
  return 0;
}
