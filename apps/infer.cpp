// cnn_infer: classifies image files with a trained model and prints the most probable classes.
//
//   cnn_infer --checkpoint best.h5 IMAGES_OR_DIRS... [--topk 5] [--tta flip|multiscale]
//             [--ensemble a.h5,b.h5] [--format text|csv|json] [--device cpu|cuda[:N]] [--batch N]
//   cnn_infer --weights model.safetensors --model resnet50 --classes 1000 [--class-names FILE]
//             [--image-size 224] [--crop-pct 0.875] [--in-channels 3] [--mean M,M,M --std S,S,S]
//             IMAGES_OR_DIRS...
//
// A checkpoint brings its model, validation transforms and class names; a weights file needs them
// given here (default normalisation: ImageNet's mean/std, or mean 0.5 and std 0.5 with
// --in-channels 1). --ensemble adds
// checkpoints whose softmax is averaged with --checkpoint's; --tta (flip, multiscale or both,
// comma-separated) averages softmax over views of each image. Folders are searched recursively.
// Predictions go to standard output, warnings to standard error. Unreadable files are skipped and
// counted; the exit status is 1 only when no image could be read or on an error.
#include <CLI/CLI.hpp>
#include <iostream>

#include "cli_checks.h"
#include "engine/cnn.h"
#include "train/infer.h"

using namespace cnn;
using namespace cnn::train;

int main(int argc, char** argv) {
  CLI::App app{"Classifies images with a trained checkpoint (or weights file) and prints the top classes."};
  std::vector<std::string> inputs, ensemble, tta;
  std::string checkpoint, device_text = "cpu", format_text = "text";
  WeightsModel weights;
  std::string weights_path;
  InferOptions options;
  app.add_option("images", inputs, "image files or folders (searched recursively)")->required();
  app.add_option("--checkpoint", checkpoint, "training checkpoint (.h5 from cnn_train; with --model: a weights file)");
  app.add_option("--ensemble", ensemble, "further checkpoints, comma-separated; softmax is averaged over all")->delimiter(',');
  app.add_option("--weights", weights_path, "weights file (.safetensors in torchvision's layout, or .h5); needs --model");
  app.add_option("--model", weights.model, "model name for a weights file (see cnn_summary --list)");
  app.add_option("--classes", weights.num_classes, "number of classes of a weights file (default: lines of --class-names)")
      ->check(cnn::apps::at_least(1));
  app.add_option("--class-names", weights.class_names_file, "class names of a weights file, one per line (default: numbers)");
  app.add_option("--in-channels", weights.in_channels, "input channels of a weights file (1 or 3)")->check(CLI::IsMember({1, 3}));
  app.add_option("--image-size", weights.image_size, "input size of a weights file")->check(CLI::Range(8, 4096));
  app.add_option("--crop-pct", weights.crop_pct, "centre crop fraction of a weights file")->check(CLI::Range(0.1, 1.0));
  app.add_option("--mean", weights.mean, "normalisation mean of a weights file, per channel on the 0..1 scale (comma-separated)")
      ->delimiter(',');
  app.add_option("--std", weights.std, "normalisation std of a weights file, per channel (comma-separated)")->delimiter(',');
  app.add_option("--topk", options.topk, "classes shown per image")->check(cnn::apps::at_least(1));
  app.add_option("--tta", tta, "test-time augmentation: flip, multiscale or both (comma-separated)")
      ->delimiter(',')
      ->check(CLI::IsMember({"flip", "multiscale"}));
  app.add_option("--format", format_text, "output: text, csv or json")->check(CLI::IsMember({"text", "csv", "json"}));
  app.add_option("--device", device_text, "cpu, cuda or cuda:N");
  app.add_option("--batch", options.batch_size, "images per forward pass")->check(cnn::apps::at_least(1));
  CLI11_PARSE(app, argc, argv);
  try {
    options.device = Device::parse(device_text);
    for (const std::string& t : tta) {
      options.tta_flip |= t == "flip";
      options.tta_multiscale |= t == "multiscale";
    }
    if (!weights.model.empty()) {  // a bare weights file, given either way
      CNN_CHECK(checkpoint.empty() != weights_path.empty(), "--model takes one weights file: give --weights or --checkpoint");
      weights.weights = weights_path.empty() ? checkpoint : weights_path;
      options.weights_models.push_back(weights);
    } else {
      CNN_CHECK(weights_path.empty(), "--weights ", weights_path, " needs --model (and --classes or --class-names)");
      // A checkpoint brings its own preprocessing and classes: options for weights files would be ignored.
      for (const char* option : {"--classes", "--class-names", "--in-channels", "--image-size", "--crop-pct", "--mean", "--std"})
        CNN_CHECK(app.count(option) == 0, option, " describes a weights file given with --model; a checkpoint brings ",
                  "its own (from its config); leave ", option, " out");
      CNN_CHECK(checkpoint.empty() || std::filesystem::path(checkpoint).extension() != ".safetensors", "--checkpoint ",
                checkpoint, " is a weights file; name its model with --model and its classes with --classes");
      if (!checkpoint.empty()) options.checkpoints.push_back(checkpoint);
    }
    for (const std::string& e : ensemble) options.checkpoints.push_back(e);
    const OutputFormat format = parse_output_format(format_text);
    const InferResult result = run_inference(collect_images(inputs), options);
    write_predictions(std::cout, result, format);
    std::cout.flush();
    if (result.unreadable)
      std::cerr << "cnn_infer: " << result.unreadable << " unreadable image" << (result.unreadable == 1 ? "" : "s")
                << " skipped\n";
    if (result.predictions.empty()) {
      std::cerr << "cnn_infer: no image could be read\n";
      return 1;
    }
  } catch (const std::exception& e) {
    std::cerr << "cnn_infer: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
