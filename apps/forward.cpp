// cnn_forward: runs a model's forward pass on a tensor from a safetensors file, for checking the
// engine against other frameworks on the same weights.
//
//   cnn_forward --model resnet18 [--classes 1000] [--in-channels 3] --weights W.safetensors
//               --input X.safetensors --output Y.safetensors [--train-mode] [--device cpu|cuda[:N]]
//
// The input is the float32 tensor named "input" in NCHW (as PyTorch writes it); the output is written
// as "output" (logits [N, classes]; 4-D outputs in NCHW). Weights in torchvision's names and layout.
#include <CLI/CLI.hpp>
#include <cstdio>

#include "cli_checks.h"
#include "engine/cnn.h"
#include "engine/io/safetensors.h"
#include "layers/registry.h"
#include "layers/weights.h"

using namespace cnn;

int main(int argc, char** argv) {
  CLI::App app{"Runs a model's forward pass on a safetensors input (NCHW) and writes the output."};
  std::string model_name, weights, input, output, device_text = "cpu";
  int classes = 1000, in_channels = 3;
  bool train_mode = false;
  app.add_option("--model", model_name, "model name (see cnn_summary --list)")->required();
  app.add_option("--classes", classes, "number of classes")->check(cnn::apps::at_least(1));
  app.add_option("--in-channels", in_channels, "input channels")->check(cnn::apps::at_least(1));
  app.add_option("--weights", weights, "weights (.safetensors in torchvision's layout, or .h5)")->required();
  app.add_option("--input", input, "safetensors file with a float32 tensor 'input' [N,C,H,W]")->required();
  app.add_option("--output", output, "safetensors file to write 'output' to")->required();
  app.add_flag("--train-mode", train_mode, "run in training mode (batch statistics, dropout)");
  app.add_option("--device", device_text, "cpu, cuda or cuda:N");
  CLI11_PARSE(app, argc, argv);
  try {
    const Device device = Device::parse(device_text);
    std::unique_ptr<Module> model = make_model(model_name, classes, in_channels, 0);
    const WeightsReport report = load_weights(*model, weights);
    std::fprintf(stderr, "cnn_forward: %s\n", report.summary().c_str());
    model->to(device);
    model->train(train_mode);
    const io::SafetensorsFile in = io::load_safetensors(input);
    const Tensor x = in.tensor("input");
    CNN_CHECK(x.dim() == 4 && x.dtype() == DType::f32, input, ": 'input' must be float32 [N,C,H,W], got ", describe(x));
    Tensor y;
    {
      NoGrad no_grad;
      y = model->forward(nchw_to_nhwc(x).to(device)).to(Device::cpu()).to(DType::f32);
    }
    if (y.dim() == 4) y = nhwc_to_nchw(y);
    io::save_safetensors(output, {{"output", y}});
    std::fprintf(stderr, "cnn_forward: wrote output %s to %s\n", y.shape().str().c_str(), output.c_str());
  } catch (const Error& e) {
    std::fprintf(stderr, "cnn_forward: %s\n", e.what());
    return 1;
  }
  return 0;
}
