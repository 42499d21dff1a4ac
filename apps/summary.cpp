// cnn_summary: a model's layers with their output shapes, parameters and multiply-accumulates (MACs)
// for an input size, and the totals, like torchinfo. It runs the shape pass only: nothing is
// allocated or computed, so it is instant even for the largest models.
//
//   cnn_summary resnet50                       (224x224x3, 1000 classes: the model's usual input)
//   cnn_summary compact_cnn --input 28x28x1 --classes 10 --depth 2
//   cnn_summary --list
// The line "total_params: N" is meant for scripts.
#include <CLI/CLI.hpp>
#include <array>
#include <cstdio>
#include <iostream>
#include <regex>
#include <string>

#include "cli_checks.h"
#include "engine/error.h"
#include "layers/registry.h"
#include "layers/shape_trace.h"

namespace {

// 1234567 -> "1,234,567"
std::string grouped(int64_t n) {
  std::string digits = std::to_string(n < 0 ? -n : n);
  for (int i = static_cast<int>(digits.size()) - 3; i > 0; i -= 3) digits.insert(static_cast<size_t>(i), ",");
  return (n < 0 ? "-" : "") + digits;
}

// "224x224x3" -> {224, 224, 3}
std::array<int64_t, 3> parse_input(const std::string& text) {
  const std::regex form(R"((\d+)x(\d+)x(\d+))");
  std::smatch m;
  CNN_CHECK(std::regex_match(text, m, form), "--input '", text,
            "': expected HxWxC, e.g. 224x224x3 (height, width, channels)");
  constexpr int64_t kLargest = 1000000;
  std::array<int64_t, 3> hwc{};
  for (size_t i = 0; i < 3; ++i) {
    const std::string digits = m[i + 1].str();
    // more than 7 digits is beyond the limit whatever they are (and beyond what int64 holds from 19)
    hwc[i] = digits.size() > 7 ? kLargest + 1 : std::stoll(digits);
    CNN_CHECK(hwc[i] >= 1 && hwc[i] <= kLargest, "--input '", text, "': ", "HWC"[i], " = ", digits,
              " is out of range; each size must be between 1 and ", kLargest);
  }
  // PyTorch users write channels first (3x160x160): read as HxWxC that is 3 rows of 160 channels.
  CNN_CHECK(!(hwc[0] <= 4 && hwc[2] > 4), "--input '", text, "' reads as H = ", hwc[0], ", W = ", hwc[1], ", C = ", hwc[2],
            "; cnn takes HxWxC (height, width, channels: NHWC), so ", hwc[0], " channels of ", hwc[1], "x", hwc[2], " are ",
            hwc[1], "x", hwc[2], "x", hwc[0]);
  return hwc;
}

void print_summary(const std::string& model_name, const cnn::ShapeTrace& trace, const cnn::Shape& input,
                   int max_depth) {
  constexpr int kNameWidth = 52, kShapeWidth = 22, kNumberWidth = 16;
  const std::string rule(kNameWidth + kShapeWidth + 2 * kNumberWidth, '=');
  std::printf("%s\n%-*s%-*s%*s%*s\n%s\n", rule.c_str(), kNameWidth, "Layer (type)", kShapeWidth, "Output shape",
              kNumberWidth, "Params", kNumberWidth, "MACs", rule.c_str());
  for (const cnn::LayerSummary& row : trace.layers()) {
    if (row.depth > max_depth) continue;
    const std::string label = std::string(static_cast<size_t>(2 * row.depth), ' ') +
                              (row.name.empty() ? model_name : row.name) + " (" + row.type + ")";
    std::printf("%-*s%-*s%*s%*s\n", kNameWidth, label.c_str(), kShapeWidth, row.output.str().c_str(), kNumberWidth,
                row.params ? grouped(row.params).c_str() : "--", kNumberWidth,
                row.macs ? grouped(row.macs).c_str() : "--");
  }
  std::printf("%s\n", rule.c_str());
  std::printf("input: %s (NHWC)\n", input.str().c_str());
  std::printf("output: %s\n", trace.output().str().c_str());
  std::printf("total_params: %lld\n", static_cast<long long>(trace.total_params()));
  const double macs = static_cast<double>(trace.total_macs());
  std::printf("total_macs: %lld (%.2f %s)\n", static_cast<long long>(trace.total_macs()),
              macs >= 1e9 ? macs / 1e9 : macs / 1e6, macs >= 1e9 ? "G" : "M");
  std::printf("params_size_mb: %.2f (f32)\n", static_cast<double>(trace.total_params()) * 4 / (1024.0 * 1024.0));
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Per-layer output shapes, parameters and MACs of a model (shape inference only)"};
  std::string model_name;
  std::string input_text;
  int classes = 0;
  int depth = 3;
  int batch = 1;
  bool list = false;
  app.add_option("model", model_name, "model name (see --list)");
  app.add_option("--input", input_text, "input size HxWxC (default: the model's usual input)");
  app.add_option("--classes", classes, "number of classes (default: the model's usual number)")->check(cnn::apps::at_least(1));
  app.add_option("--depth", depth, "deepest level of the tree to print (0: the model only)")->capture_default_str()->check(cnn::apps::at_least(0));
  app.add_option("--batch", batch, "batch size of the input")->capture_default_str()->check(cnn::apps::at_least(1));
  app.add_flag("--list", list, "list the models and exit");
  CLI11_PARSE(app, argc, argv);

  try {
    if (list) {
      for (const cnn::ModelInfo& info : cnn::model_catalog())
        std::printf("%-18s %dx%dx%d, %d classes  %s\n", info.name.c_str(), info.input_size, info.input_size,
                    info.in_channels, info.num_classes, info.description.c_str());
      return 0;
    }
    CNN_CHECK(!model_name.empty(), "no model given; name one (cnn_summary --list shows them)");
    const cnn::ModelInfo& info = cnn::model_info(model_name);
    std::array<int64_t, 3> hwc{info.input_size, info.input_size, info.in_channels};
    if (!input_text.empty()) hwc = parse_input(input_text);
    const auto model = cnn::make_model_shapes_only(model_name, classes > 0 ? classes : info.num_classes,
                                                   static_cast<int>(hwc[2]));
    const cnn::Shape input{batch, hwc[0], hwc[1], hwc[2]};
    print_summary(model_name, cnn::trace_shapes(*model, input), input, depth);
  } catch (const std::exception& e) {
    std::cerr << "cnn_summary: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
