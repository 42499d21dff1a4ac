// cnn_train: trains a model from an INI config.
//
//   cnn_train CONFIG.ini [--set section.key=value]... [--resume RUN_DIR_OR_CHECKPOINT]
//
// The config is checked completely (unknown keys with file:line and a suggestion, types, ranges)
// before any work starts. See docs/config.md for every key and configs/ for annotated examples.
#include <CLI/CLI.hpp>
#include <cstdio>

#include "engine/error.h"
#include "train/config/config.h"
#include "train/trainer.h"

int main(int argc, char** argv) {
  CLI::App app{"Trains an image classifier from an INI config (see docs/config.md)."};
  std::string config_path, resume;
  std::vector<std::string> overrides;
  app.add_option("config", config_path, "the INI config file")->required();
  app.add_option("--set", overrides, "override a key: section.key=value (repeatable)");
  app.add_option("--resume", resume, "continue a run: its folder, or a checkpoint file");
  CLI11_PARSE(app, argc, argv);
  try {
    const cnn::train::Config config = cnn::train::Config::load(config_path, overrides);
    cnn::train::TrainRunOptions options;
    options.resume = resume;
    const cnn::train::TrainSummary summary = cnn::train::run_training(config, options);
    if (summary.interrupted) return 130;  // as a shell reports a Ctrl-C'd program
  } catch (const std::exception& e) {  // cnn::Errors, and anything a library throws (a filesystem_error, bad_alloc)
    std::fprintf(stderr, "cnn_train: %s\n", e.what());
    return 1;
  }
  return 0;
}
