// Named tensors, the unit of every tensor file (HDF5 checkpoints, safetensors weights): an ordered
// list of (name, tensor) pairs, plus a lookup that names the file and the missing tensor.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "engine/tensor.h"

namespace cnn::io {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

// The tensor called `name`; a cnn::Error naming `source` (a file) and the missing name otherwise.
const Tensor& find_tensor(const NamedTensors& tensors, const std::string& name, const std::string& source);

}  // namespace cnn::io
