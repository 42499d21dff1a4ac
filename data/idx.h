// IDX files (MNIST, Fashion-MNIST): raw or gzip-compressed. The magic number gives the element type
// and rank; the dimensions follow as big-endian 32-bit integers, then the data.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "data/array_dataset.h"
#include "engine/tensor.h"

namespace cnn::data {

// Reads an unsigned-byte IDX file (.gz or raw) into a u8 CPU tensor of its shape, e.g.
// [60000, 28, 28] for images or [60000] for labels. A missing, truncated or malformed file is a
// cnn::Error that names the file and what is wrong with it.
Tensor read_idx(const std::string& path);

// An image IDX file ([N, H, W], gray) and its label IDX file ([N]) as a dataset of 1-channel
// images. Without class names the classes are numbered 0 .. max label.
std::shared_ptr<ArrayDataset> open_idx(const std::string& images_path, const std::string& labels_path,
                                       std::vector<std::string> class_names = {});

// Fashion-MNIST (or MNIST, same file names) in `dir`: train-images-idx3-ubyte[.gz] and so on, the
// training or the test split. Fashion-MNIST's class names when `fashion` is set.
std::shared_ptr<ArrayDataset> open_mnist(const std::string& dir, bool train, bool fashion = true);

}  // namespace cnn::data
