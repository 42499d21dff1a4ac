// Inference with trained classifiers, the core of cnn_infer: image files (or folders of them) run
// through the validation transforms of the checkpoint's config, in batches, on the CPU or a CUDA
// device, giving per image the softmax probabilities and the top-k classes.
//
// Test-time augmentation averages softmax over views of each image: `flip` adds the horizontally
// flipped copy of every preprocessed image, `multiscale` adds the evaluation transform at 1.15x
// the resize (then the same centre crop). An ensemble averages softmax over several models; each
// member keeps its own preprocessing, and all must share the class list.
//
// Models come from training checkpoints (train/checkpoint.h: weights, config and class names) or
// from a weights file (.safetensors or .h5, layers/weights.h) plus a model name, class count and
// the preprocessing given by hand.
//
// Files that cannot be read or decoded are skipped with one warning each and counted.
#pragma once
#include <cstdint>
#include <filesystem>
#include <functional>
#include <iosfwd>
#include <string>
#include <vector>

#include "engine/device.h"

namespace cnn::train {

// A model given as a bare weights file, with what a checkpoint would otherwise say.
struct WeightsModel {
  std::filesystem::path weights;  // .safetensors (torchvision layout) or .h5 (engine layout)
  std::string model;              // a model zoo name (layers/registry.h)
  int num_classes = 0;            // 0: the number of lines of class_names_file
  int in_channels = 3;
  int image_size = 224;
  double crop_pct = 0.875;
  std::filesystem::path class_names_file;  // one name per line; empty: "0", "1", ...
  // Normalisation per channel on the 0..1 scale (one value applies to every channel). Empty: ImageNet's
  // for 3 channels, 0.5 and 0.5 for 1 channel.
  std::vector<double> mean = {}, std = {};
};

struct InferOptions {
  std::vector<std::filesystem::path> checkpoints;  // one, or several for an ensemble
  std::vector<WeightsModel> weights_models;        // further (or the only) ensemble members
  int topk = 5;
  bool tta_flip = false;
  bool tta_multiscale = false;
  Device device = Device::cpu();
  int64_t batch_size = 32;
  // One call per unreadable file; default: standard error, prefixed "cnn_infer: warning: ".
  std::function<void(const std::string&)> warn;
};

struct Prediction {
  std::string path;
  std::vector<double> probabilities;  // per class, summing to 1
  std::vector<int64_t> top;           // the top-k class indices, most probable first
};

struct InferResult {
  std::vector<std::string> class_names;
  std::vector<Prediction> predictions;  // readable images, in input order
  int64_t unreadable = 0;               // files skipped
};

// The scale factors of multi-scale test-time augmentation (1 first).
inline constexpr double kMultiscaleFactors[] = {1.0, 1.15};

// The image files of `inputs`: a file as given; a folder's files with an image extension
// (data/file_dataset.h find_image_files: recursively, sorted by path, links that lead back up not
// followed, with a warning through `warn`). A folder holding none is a cnn::Error.
std::vector<std::string> collect_images(const std::vector<std::string>& inputs,
                                        const std::function<void(const std::string&)>& warn = {});

// Runs every model over every image. Errors in the setup (a missing checkpoint, a model that does
// not match its weights, members with different classes) are cnn::Errors.
InferResult run_inference(const std::vector<std::string>& images, const InferOptions& options);

enum class OutputFormat { text, csv, json };
OutputFormat parse_output_format(const std::string& text);  // "text", "csv" or "json"

// text: per image its path, then one line per top-k class, "  0.9123  class";
// csv:  a header "path,rank,class,probability", then one row per image and rank (rank from 1);
// json: an array of {"path", "predictions": [{"rank", "class", "index", "probability"}]}.
void write_predictions(std::ostream& out, const InferResult& result, OutputFormat format);

}  // namespace cnn::train
