// Saving and loading a model's weights (parameters and buffers, by torchvision's names).
//   HDF5 (.h5): the engine's own layout (conv weights [O,KH,KW,I]), one dataset per tensor.
//   safetensors (.safetensors): torchvision's layout (conv weights OIHW), so weights move to and
//   from PyTorch with a few lines of Python on the other side; conversion happens at this boundary.
// Loading matches tensors by name and reports what was missing, unexpected or of another shape.
// Strict loading (the default) refuses any such difference with an error that lists the first few;
// `only_matching_shapes` loads what fits and reports the rest (transfer learning onto a new head).
#pragma once
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "engine/io/named_tensors.h"
#include "layers/module.h"

namespace cnn {

struct WeightsReport {
  size_t loaded = 0;
  std::vector<std::string> missing;      // in the model, not in the file
  std::vector<std::string> unexpected;   // in the file, not in the model
  std::vector<std::string> mismatched;   // "name: file [a, b] vs model [c, d]", in the file's layout
  std::vector<std::string> hints;        // what explains the mismatches ("set [model] num_classes = 100")
  bool complete() const { return missing.empty() && unexpected.empty() && mismatched.empty(); }
  std::string summary() const;  // one line: counts and the first few names of each kind
};

enum class WeightsLayout { engine, torch };

// The model's state (parameters, then buffers per module, in state_dict order) as named tensors,
// with conv weights converted to OIHW for the torch layout.
io::NamedTensors export_state(const Module& model, WeightsLayout layout);
// Copies matching tensors into the model (converting layout, dtype and device as needed).
WeightsReport import_state(Module& model, const io::NamedTensors& tensors, WeightsLayout layout,
                           bool only_matching_shapes, const std::string& source);

// By file extension: .h5/.hdf5 (engine layout) or .safetensors (torch layout). `metadata` goes into
// the safetensors header's __metadata__ (or the HDF5 file's root attributes).
void save_weights(const Module& model, const std::filesystem::path& path, const std::map<std::string, std::string>& metadata = {});
WeightsReport load_weights(Module& model, const std::filesystem::path& path, bool only_matching_shapes = false);

// [N,C,H,W] <-> [N,H,W,C] for 4-D tensors (CPU): OIHW <-> OHWI for conv weights, NCHW <-> NHWC for images.
Tensor nchw_to_nhwc(const Tensor& t);
Tensor nhwc_to_nchw(const Tensor& t);

}  // namespace cnn
