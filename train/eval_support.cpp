// What evaluation shares between training and inference (see eval_support.h).
#include "train/eval_support.h"

#include <cmath>
#include <map>

#include "engine/cnn.h"

namespace cnn::train {

data::Normalize normalize_of(const Config& c, int channels) {
  std::vector<double> mean = c.reals("data.mean"), stddev = c.reals("data.std");
  // Single-channel data with three-channel defaults: use their first values. One value serves every
  // channel (as a broadcasting torchvision Normalize does).
  for (std::vector<double>* values : {&mean, &stddev}) {
    if (channels == 1 && values->size() == 3) values->resize(1);
    if (values->size() == 1) values->resize(static_cast<size_t>(channels), values->front());
  }
  CNN_CHECK(static_cast<int>(mean.size()) == channels && static_cast<int>(stddev.size()) == channels, c.origin("data.mean"),
            ": data.mean and data.std need ", channels, " values (one per input channel) or one for all");
  return data::Normalize{std::vector<float>(mean.begin(), mean.end()), std::vector<float>(stddev.begin(), stddev.end())};
}

data::Pipeline eval_pipeline(const Config& c, int channels, double scale) {
  const int size = static_cast<int>(c.integer("data.image_size"));
  const double shorter = std::floor(scale * size / c.real("data.crop_pct"));
  // Checked here, not found image by image: every resized image would exceed the pixel limit.
  CNN_CHECK(shorter * shorter <= static_cast<double>(data::kDefaultMaxImagePixels), c.origin("data.crop_pct"),
            ": [data] image_size ", size, " / crop_pct ", c.real("data.crop_pct"), scale != 1.0 ? " (at a test-time scale)" : "",
            " resizes every evaluated image to a shorter side of ", static_cast<int64_t>(shorter), ", at least ",
            static_cast<int64_t>(shorter * shorter),
            " pixels, beyond the limit of ", data::kDefaultMaxImagePixels, "; raise crop_pct (0.875 is usual) or lower image_size");
  const int resize = static_cast<int>(shorter);
  std::vector<data::TransformPtr> t = {std::make_shared<data::Resize>(resize), std::make_shared<data::CenterCrop>(size, size)};
  return data::Pipeline(t, size, size, channels, normalize_of(c, channels));
}

io::NamedTensors as_named(const std::vector<NamedParameter>& params) {
  io::NamedTensors out;
  for (const NamedParameter& p : params) out.emplace_back(p.name, p.tensor);
  return out;
}

io::NamedTensors as_named(const std::vector<NamedTensor>& tensors) {
  io::NamedTensors out;
  for (const NamedTensor& t : tensors) out.emplace_back(t.name, t.tensor);
  return out;
}

void restore_tensors(const io::NamedTensors& saved, const io::NamedTensors& into, const std::string& source) {
  std::map<std::string, const Tensor*> by_name;
  for (const auto& [name, t] : saved) by_name[name] = &t;
  NoGrad no_grad;
  for (const auto& [name, t] : into) {
    auto it = by_name.find(name);
    CNN_CHECK(it != by_name.end(), "checkpoint ", source, " has no tensor ", name,
              ": it was written for another model; check [model] name and num_classes");
    CNN_CHECK(it->second->shape() == t.shape(), "checkpoint ", source, ": ", name, " is ", it->second->shape().str(),
              " but the model's is ", t.shape().str(), "; check [model] name and num_classes");
    Tensor dst = t;
    dst.copy_(it->second->to(t.dtype()).to(t.device()));
  }
}

}  // namespace cnn::train
