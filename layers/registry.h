// The model zoo by name: make_model("resnet50", num_classes, in_channels, seed) builds and initialises
// a model; model_catalog() lists the names with what each is and the input it is meant for.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "layers/module.h"

namespace cnn {

struct ModelInfo {
  std::string name;
  std::string description;
  int input_size = 224;   // the usual input height and width
  int in_channels = 3;    // the usual input channels
  int num_classes = 1000;  // the usual number of classes
};

// Every model, in a stable order: resnet18..152, vgg11..19(_bn), efficientnet_b0..b7, the CIFAR
// ResNets and compact_cnn.
const std::vector<ModelInfo>& model_catalog();
std::vector<std::string> model_names();
// The catalog entry of a name; an unknown name is a cnn::Error listing the names and the closest one.
const ModelInfo& model_info(const std::string& name);

// Builds the model and initialises it with `seed` (the same seed gives the same weights).
std::unique_ptr<Module> make_model(const std::string& name, int num_classes, int in_channels, uint64_t seed);
// Builds the model without creating its tensors: enough for the shape pass and parameter counts.
std::unique_ptr<Module> make_model_shapes_only(const std::string& name, int num_classes, int in_channels);

}  // namespace cnn
