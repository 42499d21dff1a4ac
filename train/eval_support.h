// What evaluation shares between training and inference: the validation transforms a config
// describes (resize to image_size / crop_pct, centre crop, normalise) and the copying of
// checkpointed tensors into a freshly built model. cnn_train's validation and cnn_infer use the
// same functions, so a checkpoint is always evaluated the way it was validated.
#pragma once
#include <string>
#include <vector>

#include "data/transforms.h"
#include "engine/io/named_tensors.h"
#include "layers/module.h"
#include "train/config/config.h"

namespace cnn::train {

// [data] mean and std for `channels` input channels (three-valued defaults shrink to their first
// value for single-channel data; one value serves every channel); a cnn::Error naming the config
// line when the counts do not fit.
data::Normalize normalize_of(const Config& c, int channels);

// The evaluation pipeline: Resize(floor(scale * image_size / crop_pct)), CenterCrop(image_size),
// normalise. `scale` > 1 looks at a larger resize of the same image (multi-scale test-time
// augmentation); the output is image_size x image_size either way.
data::Pipeline eval_pipeline(const Config& c, int channels, double scale = 1.0);

// A model's parameters or buffers as named tensors (sharing storage with the model's own).
io::NamedTensors as_named(const std::vector<NamedParameter>& params);
io::NamedTensors as_named(const std::vector<NamedTensor>& tensors);

// Copies checkpointed tensors into the model's own (same names and shapes; a mismatch is a
// cnn::Error naming `source` that says the checkpoint belongs to another model).
void restore_tensors(const io::NamedTensors& saved, const io::NamedTensors& into, const std::string& source);

}  // namespace cnn::train
