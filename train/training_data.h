// The data of a training run: the training set and its loader (with the transforms of [augment]),
// the validation loader, the class names (the trainer writes them to classes.txt), and with
// augment.on_gpu the batched crop, flip and normalisation on the training device.
#pragma once
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "data/batch_augment.h"
#include "data/dataset.h"
#include "data/loader.h"

namespace cnn::train {

struct TrainSettings;
class RunLog;

// augment.on_gpu: the random crop of the padded image, the flip and the normalisation of a uint8
// batch, on the device the batch is on. Sample n of the batch draws with key (seed, epoch,
// first_sample + n), so a resumed run draws what the uninterrupted one would have.
class BatchCropFlip {
 public:
  explicit BatchCropFlip(const TrainSettings& settings);
  Tensor operator()(const Tensor& images, int64_t epoch, int64_t first_sample) const;

 private:
  data::CropFlipOptions options_;
  data::Normalize normalize_;
  DType dtype_;
  uint64_t seed_;
};

struct TrainingData {
  data::DatasetPtr train_set;
  // The head's class count: [model] num_classes, or, when it was left out, the training data's
  // (the classes it names, at least its largest label + 1).
  int64_t classes = 0;
  std::vector<std::string> class_names;  // `classes` of them (numbers where the data has no names)
  std::unique_ptr<data::Loader> train_loader;
  std::unique_ptr<data::Loader> validation_loader;  // null without [data] val_path
  std::unique_ptr<BatchCropFlip> crop_flip;         // null unless augment.on_gpu
  int64_t batch_size = 0;  // per rank
  int64_t rank = 0, world_size = 1;
  int64_t batches_per_epoch = 0;  // per rank
  int64_t steps_per_epoch = 0;  // optimizer steps: batches_per_epoch / accumulate (at least 1: a larger accumulate is refused)

  // Batch `index` (1-based) of `epoch` on `device`, ready for the model (cropped, flipped and
  // normalised there with augment.on_gpu).
  Tensor images_on_device(const data::Batch& batch, const Device& device, int64_t epoch, int64_t index) const;
};

// Opens the datasets and loaders; a cnn::Error (naming the config line) when the labels do not fit
// [model] num_classes, the data makes no batch, or [train] accumulate exceeds the batches of an
// epoch. Loader warnings go to `log`.
TrainingData open_training_data(const TrainSettings& settings, RunLog& log);
// The same over a training set already opened ([data] path is not read; bench_train's synthetic images).
TrainingData open_training_data(const TrainSettings& settings, RunLog& log, data::DatasetPtr train_set);

}  // namespace cnn::train
