// IDX files (MNIST, Fashion-MNIST): raw or gzip-compressed. The magic number gives the element type
// and rank; the dimensions follow as big-endian 32-bit integers, then the data.
#pragma once
#include <string>

#include "engine/tensor.h"

namespace cnn::data {

// Reads an unsigned-byte IDX file (.gz or raw) into a u8 CPU tensor of its shape, e.g.
// [60000, 28, 28] for images or [60000] for labels. A missing, truncated or malformed file is a
// cnn::Error that names the file and what is wrong with it.
Tensor read_idx(const std::string& path);

}  // namespace cnn::data
