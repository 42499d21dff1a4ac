// A small training run for tests: a scratch folder (removed afterwards) holding a tiny IDX split
// of 4 easy classes, the config text of a compact CNN on it, and run options whose console output
// goes to a string. Shared by the trainer tests and the multi-process tests.
#pragma once
#include <cstdint>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "train/trainer.h"

namespace cnn::train::testing {

struct ScratchDir {
  std::filesystem::path path;
  explicit ScratchDir(const std::string& name);
  ~ScratchDir();
};

// `count` 28x28 images of 4 classes in <dir>/<prefix>-images-idx3-ubyte and -labels-idx1-ubyte:
// class k is a bright 8x8 square in quadrant k on a noisy background.
void write_idx_split(const std::filesystem::path& dir, const std::string& prefix, int count, uint32_t seed);

// `per_class` 28x28 grey PNGs in <root>/<name>/ for each of `names` (an image folder dataset):
// class k is a bright square in quadrant k (k < 4).
void write_image_folder(const std::filesystem::path& root, const std::vector<std::string>& names, int per_class);

// The config of a 2-epoch compact-CNN run on the IDX data in `data`, run folders under `runs`.
std::string config_text(const std::filesystem::path& data, const std::filesystem::path& runs);

struct SmallRun {
  ScratchDir dir;
  std::string text;
  std::ostringstream quiet;
  TrainRunOptions opts;
  SmallRun(const std::string& name, int train_images, int test_images, uint32_t train_seed, uint32_t test_seed);
};

// Builds the learner of `overrides` applied to config_text (no data needed) and runs 3 training
// steps (forward, backward, unscale, clip, update) on a random batch of 8 on the config's device,
// each inside a HostSyncCheck, so that any host read or synchronisation in the step throws. Then
// checks, reading after the steps, that they measured their gradients and updated the weights.
void check_steps_never_wait_for_the_device(const std::vector<std::string>& overrides);

// The whole text of a file ("" when it cannot be read).
std::string read_text_file(const std::filesystem::path& path);

// Trains `run`'s config with `overrides` twice, eagerly and with [train] cuda_graphs (the epoch's
// last incomplete batch kept, so that it runs eagerly between replays), and checks
// that both runs agree bit for bit: every step's loss, the validation and every exported weight
// and buffer. Returns the graph run's train.log.
std::string check_graphs_train_as_eager(SmallRun& run, std::vector<std::string> overrides);

}  // namespace cnn::train::testing
