// Opening the training and validation data (see training_data.h).
#include "train/training_data.h"

#include <algorithm>

#include "data/open_dataset.h"
#include "data/randaugment.h"
#include "data/relabelled_dataset.h"
#include "data/transforms.h"
#include "engine/error.h"
#include "engine/names_in_words.h"
#include "train/interrupt.h"
#include "train/run_log.h"
#include "train/train_settings.h"

namespace cnn::train {

namespace {
// The loader's training transforms, in torchvision's order: crop (random resized, or resize + centre
// crop + padded random crop), flip, colour jitter, RandAugment, normalisation, random erasing. With
// augment.on_gpu the pipeline stops at uint8 after the colour transforms and BatchCropFlip does the
// padded crop, the flip and the normalisation on the training device (after RandAugment, then).
data::Pipeline train_pipeline(const TrainSettings& settings) {
  const AugmentSettings& augment = settings.augment;
  const int size = settings.data.image_size;
  std::vector<data::TransformPtr> transforms;
  const double flip = augment.on_device ? 0.0 : augment.hflip;
  if (augment.random_resized_crop) {  // the flip, if any, in the same resampling pass
    transforms.push_back(std::make_shared<data::RandomResizedCrop>(size, size, std::array<double, 2>{augment.scale_min, 1.0},
                                                                   std::array<double, 2>{augment.ratio_min, augment.ratio_max},
                                                                   flip));
  } else {
    transforms.push_back(std::make_shared<data::Resize>(size));
    transforms.push_back(std::make_shared<data::CenterCrop>(size, size));
    if (augment.crop_padding > 0 && !augment.on_device)
      transforms.push_back(std::make_shared<data::RandomCrop>(size, size, augment.crop_padding));
  }
  if (flip > 0 && !augment.random_resized_crop) transforms.push_back(std::make_shared<data::RandomHorizontalFlip>(flip));
  const float jitter = static_cast<float>(augment.color_jitter);
  if (jitter > 0) transforms.push_back(std::make_shared<data::ColorJitter>(jitter, jitter, jitter, 0.0f));
  if (augment.randaugment_ops > 0)
    transforms.push_back(std::make_shared<data::RandAugment>(augment.randaugment_ops, augment.randaugment_magnitude));
  data::Pipeline pipeline(transforms, size, size, settings.data.channels, settings.data.normalize);
  if (augment.random_erasing > 0) pipeline.set_random_erasing(data::RandomErasing{augment.random_erasing});
  return pipeline;
}

// The class names of the training set, cut or extended with numbers to `classes`.
std::vector<std::string> class_names_of(const data::Dataset& train_set, int64_t classes) {
  std::vector<std::string> names = train_set.class_names();
  names.resize(std::min<size_t>(names.size(), static_cast<size_t>(classes)));
  while (static_cast<int64_t>(names.size()) < classes) names.push_back(std::to_string(names.size()));
  return names;
}
}  // namespace

BatchCropFlip::BatchCropFlip(const TrainSettings& settings)
    : normalize_(settings.data.normalize), dtype_(settings.precision.compute), seed_(settings.compute.seed) {
  options_.height = options_.width = settings.data.image_size;
  options_.padding = settings.augment.random_resized_crop ? 0 : settings.augment.crop_padding;
  options_.random_crop = true;
  options_.flip_probability = settings.augment.hflip;
}

Tensor BatchCropFlip::operator()(const Tensor& images, int64_t epoch, int64_t first_sample) const {
  return data::crop_flip_normalize(images, options_, normalize_, dtype_, seed_, static_cast<uint64_t>(epoch),
                                   static_cast<uint64_t>(first_sample));
}

Tensor TrainingData::images_on_device(const data::Batch& batch, const Device& device, int64_t epoch, int64_t index) const {
  Tensor images = batch.images.to(device);
  // The random stream of a sample is keyed by its place among all ranks' batches.
  if (crop_flip) images = (*crop_flip)(images, epoch, ((index - 1) * world_size + rank) * batch_size);
  return images;
}

namespace {
// The validation set scored on the training set's class indices. When both sets name their classes
// (class folders, list or packed files with names), validation classes are matched to training
// classes by name: a subset, or another order, is mapped; a name the training set lacks is refused;
// training classes with no validation image are named in a warning. Sets whose names are only
// numbers (IDX, CIFAR, list files of indices) are taken as indices. Either way every validation
// label must be one of the model's classes, checked here at start rather than after an epoch.
data::DatasetPtr on_training_classes(data::DatasetPtr validation, const data::Dataset& train, const DataSettings& wanted,
                                     int64_t classes, RunLog& log) {
  const std::vector<std::string>& train_names = train.class_names();
  const std::vector<std::string>& names = validation->class_names();
  const bool named = names != data::numbered_class_names(validation->num_classes()) &&
                     train_names != data::numbered_class_names(train.num_classes());
  if (named && names != train_names) {
    std::vector<int64_t> label_of;
    std::vector<std::string> unknown;
    std::vector<bool> seen(train_names.size(), false);
    for (const std::string& name : names) {
      const auto at = std::find(train_names.begin(), train_names.end(), name);
      if (at == train_names.end()) {
        unknown.push_back(name);
        continue;
      }
      label_of.push_back(at - train_names.begin());
      seen[static_cast<size_t>(at - train_names.begin())] = true;
    }
    CNN_CHECK(unknown.empty(), "the validation data ", wanted.validation_spec, " has ", unknown.size(), " class",
              unknown.size() == 1 ? "" : "es", " that the training data ", wanted.train_spec, " lacks: ", names_in_words(unknown),
              "; the validation classes must be training classes (matched by name)");
    std::vector<std::string> absent;
    for (size_t k = 0; k < train_names.size(); ++k)
      if (!seen[k]) absent.push_back(train_names[k]);
    if (!absent.empty())
      log.warn("the validation data has no class " + names_in_words(absent) + " of the training data (" +
               std::to_string(absent.size()) + " of " + std::to_string(train_names.size()) + "); it is scored on the others");
    validation = std::make_shared<data::RelabelledDataset>(std::move(validation), std::move(label_of), train_names);
  }
  int64_t max_label = -1;
  for (int64_t i = 0; i < validation->size(); ++i) max_label = std::max(max_label, validation->label(i));
  CNN_CHECK(max_label < classes, "the validation data ", wanted.validation_spec, " has labels up to ", max_label,
            " but the model has ", classes, " classes ([model] num_classes, ", wanted.classes_origin,
            "); validate on data of the training classes");
  return validation;
}
}  // namespace

TrainingData open_training_data(const TrainSettings& settings, RunLog& log) {
  return open_training_data(settings, log, data::open_dataset(settings.data.train_spec, [&log](const std::string& message) { log.warn(message); }));
}

TrainingData open_training_data(const TrainSettings& settings, RunLog& log, data::DatasetPtr train_set) {
  const DataSettings& wanted = settings.data;
  TrainingData data;
  const data::LogFn warn = [&log](const std::string& message) { log.warn(message); };
  data.train_set = std::move(train_set);
  int64_t max_label = -1;
  for (int64_t i = 0; i < data.train_set->size(); ++i) max_label = std::max(max_label, data.train_set->label(i));
  const int64_t in_data = std::max(data.train_set->num_classes(), max_label + 1);
  data.classes = wanted.classes_from_data ? in_data : wanted.classes;
  CNN_CHECK(max_label < data.classes, "the training data has labels up to ", max_label, " but [model] num_classes is ",
            data.classes, " (", wanted.classes_origin, "); set num_classes to at least ", max_label + 1);
  if (data.classes > in_data)
    log.warn("[model] num_classes = " + std::to_string(data.classes) + " (" + wanted.classes_origin + ") but the training data has " +
             std::to_string(in_data) + " classes: " + std::to_string(data.classes - in_data) +
             " outputs of the head never see a training image (leave num_classes out to take the data's count)");
  data.class_names = class_names_of(*data.train_set, data.classes);
  data::LoaderOptions train_options = wanted.loader;
  train_options.log = warn;
  train_options.stop_waiting = stop_check_for(settings.distributed.world.world_size);  // Ctrl-C while a file system hangs
  data.train_loader = std::make_unique<data::Loader>(data.train_set, train_pipeline(settings), train_options);
  if (settings.augment.on_device) data.crop_flip = std::make_unique<BatchCropFlip>(settings);
  if (wanted.validation_transforms) {
    data::LoaderOptions validation_options = train_options;
    validation_options.dtype = settings.precision.compute;
    validation_options.shuffle = false;
    validation_options.drop_last = false;
    validation_options.pad_shards = false;  // each validation sample counted once, on one rank
    data.validation_loader = std::make_unique<data::Loader>(
        on_training_classes(data::open_dataset(wanted.validation_spec, warn), *data.train_set, wanted, data.classes, log),
        *wanted.validation_transforms, validation_options);
  }
  data.batch_size = train_options.batch_size;
  data.rank = settings.distributed.world.rank;
  data.world_size = settings.distributed.world.world_size;
  data.batches_per_epoch = data.train_loader->steps_per_epoch();
  CNN_CHECK(data.batches_per_epoch > 0, "the training data (", data.train_set->size(), " samples) makes no batch of ",
            data.batch_size, "; lower data.batch_size or set data.drop_last = false");
  // The batches left over at the end of an epoch never step: more than an epoch's would never step at all.
  const int64_t accumulate = settings.loop.accumulate;
  CNN_CHECK(accumulate <= data.batches_per_epoch, settings.loop.accumulate_origin, ": [train] accumulate = ", accumulate,
            " is more than the ", data.batches_per_epoch, " batches of an epoch", data.world_size > 1 ? " on each rank" : "", " (",
            data.train_set->size(), " training images in batches of ", data.batch_size,
            data.world_size > 1 ? " over " + std::to_string(data.world_size) + " ranks" : "",
            "): no optimizer step would ever be taken; set accumulate to at most ", data.batches_per_epoch,
            ", or lower [data] batch_size");
  data.steps_per_epoch = data.batches_per_epoch / accumulate;
  return data;
}

}  // namespace cnn::train
