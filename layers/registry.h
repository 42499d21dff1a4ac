// The model zoo by name: make_model("resnet50", num_classes, in_channels, seed) builds and initialises
// a model; model_catalog() lists the names with what each is and the input it is meant for.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
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

// Regularisation settings that change how a model of the zoo is built. Unset values keep the
// architecture's own defaults (torchvision's); a setting the architecture has no place for is a
// cnn::Error naming the model and the setting, never silently ignored.
struct ModelOptions {
  // Dropout before the final Linear layer (VGG: both classifier dropouts; ResNets gain one before fc).
  std::optional<double> dropout = std::nullopt;
  // Stochastic depth: the drop probability of the residual branch grows linearly over the blocks up
  // to this value (EfficientNet as torchvision; ResNets as timm's drop_path_rate).
  std::optional<double> drop_path = std::nullopt;
  // Residual blocks start as the identity: the last BN scale of each block starts at 0 (ResNets).
  bool zero_init_residual = false;
};

// Every model, in a stable order: resnet18..152, vgg11..19(_bn), efficientnet_b0..b7, the CIFAR
// ResNets and compact_cnn.
const std::vector<ModelInfo>& model_catalog();
std::vector<std::string> model_names();
// The catalog entry of a name; an unknown name is a cnn::Error listing the names and the closest one.
const ModelInfo& model_info(const std::string& name);

// Builds the model and initialises it with `seed` (the same seed gives the same weights).
std::unique_ptr<Module> make_model(const std::string& name, int num_classes, int in_channels, uint64_t seed,
                                   const ModelOptions& options = {});
// Builds the model without creating its tensors: enough for the shape pass and parameter counts.
std::unique_ptr<Module> make_model_shapes_only(const std::string& name, int num_classes, int in_channels,
                                               const ModelOptions& options = {});

}  // namespace cnn
