// ArrayDataset: in-memory u8 images; a sample is copied out and converted to the requested channels.
#include "data/array_dataset.h"

#include <cstring>

namespace cnn::data {

ArrayDataset::ArrayDataset(Tensor images, std::vector<int64_t> labels, std::vector<std::string> class_names,
                           std::string name)
    : images_(std::move(images)), labels_(std::move(labels)), name_(std::move(name)) {
  CNN_CHECK(images_.dtype() == DType::u8 && images_.dim() == 4 && images_.device().is_cpu(), name_,
            ": images must be a u8 CPU tensor [N, H, W, C], not ", describe(images_));
  CNN_CHECK(images_.size(0) == static_cast<int64_t>(labels_.size()), name_, ": ", images_.size(0), " images but ",
            labels_.size(), " labels; the image and label files do not belong together");
  class_names_ = std::move(class_names);
  check_labels(name_);
}

Image ArrayDataset::load(int64_t index, const DecodeOptions& options) const {
  const Shape& s = images_.shape();
  Image image(static_cast<int>(s[1]), static_cast<int>(s[2]), static_cast<int>(s[3]));
  const size_t bytes = image.pixels.size();
  std::memcpy(image.pixels.data(), images_.data_as<uint8_t>() + static_cast<size_t>(index) * bytes, bytes);
  return convert_channels(std::move(image), options.channels);
}

}  // namespace cnn::data
