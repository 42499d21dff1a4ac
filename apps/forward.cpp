// cnn_forward: runs a model's forward pass on a tensor from a safetensors file, for checking the
// engine against other frameworks on the same weights; optionally trains a few optimizer steps on
// that batch first, with the optimizer, schedule and loss of a config file, and writes the weights
// after them (the check that a recipe behaves as in PyTorch).
//
//   cnn_forward --model resnet18 [--classes 1000] [--in-channels 3] --weights W.safetensors
//               --input X.safetensors --output Y.safetensors [--train-mode] [--device cpu|cuda[:N]]
//               [--dropout P] [--drop-path P] [--compute f32|f64]
//               [--train-steps N --recipe recipe.ini [--steps-per-epoch S] --weights-out W2.safetensors]
//
// The input is the float32 tensor named "input" in NCHW (as PyTorch writes it); the output is written
// as "output" (logits [N, classes]; 4-D outputs in NCHW). Weights in torchvision's names and layout.
// With --train-steps the input file also holds "labels" (int64 [N]); the recipe's [optim],
// [schedule], [loss] and [train] sections drive train/train_step.h's steps exactly as in cnn_train
// (its [model] and [data] sections are overridden by the options here), the schedule counting
// --steps-per-epoch steps per epoch. The output is then the forward pass after the steps.
// --compute f64 computes the activations (and their gradients) in double while the master weights
// and the optimizer stay f32, as in cnn_train: a recipe comparison that float32's rounding cannot
// upset (one ReLU input within float32's error of zero flips its mask and moves a whole layer's
// gradient; see scripts/compare_with_torchvision.py).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>
#include <optional>

#include "cli_checks.h"
#include "engine/cnn.h"
#include "engine/io/safetensors.h"
#include "layers/registry.h"
#include "layers/weights.h"
#include "train/config/config.h"
#include "train/distributed/data_parallel.h"
#include "train/learner.h"
#include "train/log/console.h"
#include "train/run_log.h"
#include "train/train_settings.h"
#include "train/train_step.h"

using namespace cnn;

namespace {

struct Options {
  std::string model_name, weights, input, output, device_text = "cpu";
  int classes = 1000, in_channels = 3;
  bool train_mode = false;
  std::optional<double> dropout, drop_path;
  int64_t train_steps = 0, steps_per_epoch = 1;
  std::string recipe, weights_out;
  std::string compute = "f32";
  DType compute_dtype() const { return parse_dtype(compute); }
};

// The model with its weights: built as cnn_train builds it (train::build_learner) when it trains.
std::unique_ptr<Module> trained_model(const Options& o, const Tensor& images_nchw, const Tensor& labels) {
  std::vector<std::string> overrides = {"model.name=" + o.model_name, "model.num_classes=" + std::to_string(o.classes),
                                        "model.in_channels=" + std::to_string(o.in_channels), "model.pretrained=" + o.weights,
                                        "model.pretrained_head=true", "train.device=" + o.device_text,
                                        // Never opened: the batch is the data (a path only satisfies the config).
                                        "data.path=" + o.input, "data.batch_size=" + std::to_string(labels.size(0))};
  if (o.dropout) overrides.push_back("model.dropout=" + std::to_string(*o.dropout));
  if (o.drop_path) overrides.push_back("model.drop_path=" + std::to_string(*o.drop_path));
  train::TrainSettings settings = train::from_config(train::Config::load(o.recipe, overrides));
  if (o.compute_dtype() != DType::f32) {
    CNN_CHECK(settings.precision.compute == DType::f32, o.recipe, ": [precision] mode = ", settings.precision.mode,
              " and --compute ", o.compute, " contradict each other; leave one of them at its default");
    settings.precision.compute = o.compute_dtype();  // the learner's model computes in it; masters stay f32
  }
  train::Console console(std::cerr, train::LogLevel::normal, train::ProgressMode::lines, false);
  train::RunLog log(console, {});
  train::Learner learner = train::build_learner(settings, o.steps_per_epoch, log);
  train::DataParallel single_process(settings);
  const Device device = settings.compute.device;
  const Tensor images = nchw_to_nhwc(images_nchw).to(device).to(settings.precision.compute);
  for (int64_t step = 0; step < o.train_steps; ++step) {
    const train::MicroBatch batch{.images = images, .labels = labels.to(device), .epoch = step / o.steps_per_epoch,
                                  .index = step % o.steps_per_epoch + 1};
    const double loss = train::forward_backward(learner, batch, settings).to(Device::cpu()).item();
    const double lr = learner.schedule.lr(step);
    train::optimizer_step(learner, step, settings.optim.clip_grad_norm, {}, single_process);
    CNN_CHECK(learner.scaler.read().last_applied, "step ", step, " was skipped: its gradients hold inf or nan");
    std::fprintf(stderr, "cnn_forward: step %lld  loss %.6f  lr %.6g\n", static_cast<long long>(step), loss, lr);
  }
  save_weights(*learner.model, o.weights_out, {{"format", "pt"}});
  std::fprintf(stderr, "cnn_forward: wrote the weights after %lld steps to %s\n", static_cast<long long>(o.train_steps),
               o.weights_out.c_str());
  return std::move(learner.model);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Runs a model's forward pass on a safetensors input (NCHW) and writes the output."};
  Options o;
  app.add_option("--model", o.model_name, "model name (see cnn_summary --list)")->required();
  app.add_option("--classes", o.classes, "number of classes")->check(cnn::apps::at_least(1));
  app.add_option("--in-channels", o.in_channels, "input channels")->check(cnn::apps::at_least(1));
  app.add_option("--weights", o.weights, "weights (.safetensors in torchvision's layout, or .h5)")->required();
  app.add_option("--input", o.input, "safetensors file with a float32 tensor 'input' [N,C,H,W]")->required();
  app.add_option("--output", o.output, "safetensors file to write 'output' to")->required();
  app.add_flag("--train-mode", o.train_mode, "run in training mode (batch statistics, dropout)");
  app.add_option("--device", o.device_text, "cpu, cuda or cuda:N");
  app.add_option("--dropout", o.dropout, "the model's dropout before the classifier ([model] dropout)")
      ->check(cnn::apps::probability());
  app.add_option("--drop-path", o.drop_path, "the model's stochastic depth rate ([model] drop_path)")
      ->check(cnn::apps::probability());
  app.add_option("--compute", o.compute, "dtype of the activations and their gradients (default f32; masters stay f32)")
      ->check(CLI::IsMember({"f32", "f64"}));
  app.add_option("--train-steps", o.train_steps, "optimizer steps on the input batch before the forward pass")
      ->check(cnn::apps::at_least(1));
  app.add_option("--recipe", o.recipe, "config file whose [optim], [schedule], [loss] and [train] the steps use");
  app.add_option("--steps-per-epoch", o.steps_per_epoch, "steps that make an epoch for the schedule (default 1)")
      ->check(cnn::apps::at_least(1));
  app.add_option("--weights-out", o.weights_out, "safetensors file for the weights after the steps (torchvision's layout)");
  CLI11_PARSE(app, argc, argv);
  try {
    CNN_CHECK(o.train_steps == 0 || (!o.recipe.empty() && !o.weights_out.empty()),
              "--train-steps needs --recipe (the config of the optimizer) and --weights-out (where the weights go)");
    CNN_CHECK(o.train_steps > 0 || (o.recipe.empty() && o.weights_out.empty()), "--recipe and --weights-out need --train-steps");
    const Device device = Device::parse(o.device_text);
    const io::SafetensorsFile in = io::load_safetensors(o.input);
    const Tensor x = in.tensor("input");
    CNN_CHECK(x.dim() == 4 && x.dtype() == DType::f32, o.input, ": 'input' must be float32 [N,C,H,W], got ", describe(x));
    std::unique_ptr<Module> model;
    if (o.train_steps > 0) {
      const Tensor labels = in.tensor("labels");
      CNN_CHECK(labels.dim() == 1 && labels.dtype() == DType::i64 && labels.size(0) == x.size(0), o.input,
                ": 'labels' must be int64 [", x.size(0), "] for --train-steps, got ", describe(labels));
      model = trained_model(o, x, labels);
    } else {
      ModelOptions options;
      options.dropout = o.dropout;
      options.drop_path = o.drop_path;
      model = make_model(o.model_name, o.classes, o.in_channels, 0, options);
      const WeightsReport report = load_weights(*model, o.weights);
      std::fprintf(stderr, "cnn_forward: %s\n", report.summary().c_str());
      model->to(device);
      model->to(o.compute_dtype());
    }
    model->train(o.train_mode);
    Tensor y;
    {
      NoGrad no_grad;
      y = model->forward(nchw_to_nhwc(x).to(device).to(o.compute_dtype())).to(Device::cpu()).to(DType::f32);
    }
    if (y.dim() == 4) y = nhwc_to_nchw(y);
    io::save_safetensors(o.output, {{"output", y}});
    std::fprintf(stderr, "cnn_forward: wrote output %s to %s\n", y.shape().str().c_str(), o.output.c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cnn_forward: %s\n", e.what());
    return 1;
  }
  return 0;
}
