// A dataset held in memory as one u8 tensor of images [N, H, W, C] and their labels: what IDX
// (MNIST, Fashion-MNIST) and CIFAR files become once read. Loading a sample is a copy.
#pragma once
#include <string>
#include <vector>

#include "data/dataset.h"
#include "engine/tensor.h"

namespace cnn::data {

class ArrayDataset : public Dataset {
 public:
  // images: u8 [N, H, W, C] on the CPU; labels: one per image; `name` (the files read) goes into
  // messages. Labels outside [0, class_names.size()) are a cnn::Error here.
  ArrayDataset(Tensor images, std::vector<int64_t> labels, std::vector<std::string> class_names, std::string name);

  int64_t size() const override { return static_cast<int64_t>(labels_.size()); }
  int64_t label(int64_t index) const override { return labels_[static_cast<size_t>(index)]; }
  Image load(int64_t index, const DecodeOptions& options) const override;
  std::string source(int64_t index) const override { return name_ + " [" + std::to_string(index) + "]"; }

  const Tensor& images() const { return images_; }  // u8 [N, H, W, C]

 private:
  Tensor images_;
  std::vector<int64_t> labels_;
  std::string name_;
};

}  // namespace cnn::data
