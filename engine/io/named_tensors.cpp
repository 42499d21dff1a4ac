// Lookup in a list of named tensors.
#include "engine/io/named_tensors.h"

#include "engine/error.h"

namespace cnn::io {

const Tensor& find_tensor(const NamedTensors& tensors, const std::string& name, const std::string& source) {
  for (const auto& [n, t] : tensors)
    if (n == name) return t;
  throw Error("tensor '" + name + "' is not in " + source + " (" + std::to_string(tensors.size()) +
              " tensors there); check the name, or that the file was written by the matching model");
}

}  // namespace cnn::io
