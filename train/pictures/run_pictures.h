// The pictures of a run, made by the trainer on the main rank: at the start of training a grid of
// the first batch as the model sees it (de-normalised, each image captioned with its label, or with
// the two strongest classes of its soft target after MixUp/CutMix); after each validation the
// confusion matrix as a heat map and a grid of the most confident mistakes (true class, predicted
// class and its probability). Each goes into the run folder (samples.png, confusion.png,
// mistakes.png, rewritten atomically) and into TensorBoard as an image; every [log] histogram_every
// epochs, TensorBoard histograms of each parameter's values and gradients.
#pragma once
#include <filesystem>
#include <string>
#include <vector>

#include "layers/module.h"
#include "train/train_settings.h"
#include "train/train_step.h"
#include "train/validation.h"

namespace cnn::train {

class EventWriter;

constexpr int64_t kMistakesShown = 16;
constexpr int64_t kSamplesShown = 64;

class RunPictures {
 public:
  // `events` may be null (no TensorBoard); nothing is made when `enabled` is false.
  RunPictures(const TrainSettings& settings, std::filesystem::path run_dir, EventWriter* events,
              std::vector<std::string> class_names, bool enabled);

  // The batch about to be trained on, mixed as forward_backward will mix it (the first call only).
  void first_batch(const MicroBatch& batch, int64_t step);
  void after_validation(const Validation& validation, int64_t step);
  bool histograms_due(int64_t epoch) const;
  // Each parameter's values and gradient (divided by `loss_scale`, which the gradients still carry).
  void histograms(const Module& model, double loss_scale, int64_t step);

 private:
  void publish(const std::string& name, const data::Image& image, int64_t step);
  std::string class_name(int64_t k) const;

  const TrainSettings& settings_;
  std::filesystem::path run_dir_;
  EventWriter* events_;
  std::vector<std::string> class_names_;
  bool enabled_;
  bool samples_done_ = false;
};

// The caption of a training image: its class, or the classes of a soft target with more than 10%
// of the weight, strongest first, with their weights ("COAT 62% / SHIRT 38%" on two lines).
std::string target_caption(const std::vector<double>& target_row, const std::vector<std::string>& class_names);

}  // namespace cnn::train
