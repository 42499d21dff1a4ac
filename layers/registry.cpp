// The model registry (see registry.h).
#include "layers/registry.h"

#include <algorithm>
#include <climits>
#include <functional>

#include "engine/closest_match.h"

#include "layers/models/compact_cnn.h"
#include "layers/models/efficientnet.h"
#include "layers/models/mlp.h"
#include "layers/models/resnet.h"
#include "layers/models/vgg.h"

namespace cnn {

namespace {

using Builder = std::function<std::unique_ptr<Module>(int num_classes, int in_channels, const ModelOptions& options)>;

struct Entry {
  ModelInfo info;
  Builder build;
};

// The settings of `options` an architecture has no place for are refused by name.
struct Accepts {
  bool dropout = false, drop_path = false, zero_init_residual = false;
};

void check_accepts(const std::string& model, const ModelOptions& options, Accepts accepts) {
  const auto refuse = [&](const char* setting, const char* why) {
    throw Error("model " + model + ": " + setting + " is not available for this architecture (" + why +
                "); leave it unset");
  };
  if (options.dropout && *options.dropout > 0 && !accepts.dropout) refuse("dropout", "it has no dropout layer");
  if (options.drop_path && *options.drop_path > 0 && !accepts.drop_path) refuse("drop_path", "it has no residual blocks");
  if (options.zero_init_residual && !accepts.zero_init_residual)
    refuse("zero_init_residual", "it has no residual blocks ending in BatchNorm");
}

ResNetOptions resnet_options(const ModelOptions& o) {
  return {.zero_init_residual = o.zero_init_residual, .drop_path = o.drop_path.value_or(0), .dropout = o.dropout.value_or(0)};
}

std::vector<Entry> make_entries() {
  const Accepts resnet_like{true, true, true}, dropout_only{true, false, false}, nothing{};
  std::vector<Entry> entries;
  const auto add = [&entries](ModelInfo info, Accepts accepts, Builder build) {
    entries.push_back({info, [name = info.name, accepts, build](int classes, int channels, const ModelOptions& o) {
                         check_accepts(name, o, accepts);
                         return build(classes, channels, o);
                       }});
  };
  for (int depth : {18, 34, 50, 101, 152})
    add({"resnet" + std::to_string(depth),
         "ResNet-" + std::to_string(depth) + " (torchvision, " + (depth < 50 ? "BasicBlock" : "Bottleneck v1.5") + ")"},
        resnet_like, [depth](int classes, int channels, const ModelOptions& o) {
          return resnet(depth, classes, channels, resnet_options(o));
        });
  for (int depth : {11, 13, 16, 19})
    for (bool bn : {false, true})
      add({"vgg" + std::to_string(depth) + (bn ? "_bn" : ""),
           "VGG-" + std::to_string(depth) + (bn ? " with BatchNorm" : "") + " (torchvision)"},
          dropout_only, [depth, bn](int classes, int channels, const ModelOptions& o) {
            return vgg(depth, bn, classes, channels, o.dropout.value_or(0.5));
          });
  // The crop sizes of torchvision's EfficientNet weights (their published MACs are at these sizes).
  constexpr std::array<int, 8> kEfficientNetSizes{224, 240, 288, 300, 380, 456, 528, 600};
  for (int b = 0; b < 8; ++b)
    add({"efficientnet_b" + std::to_string(b), "EfficientNet-B" + std::to_string(b) + " (torchvision)",
         kEfficientNetSizes[static_cast<size_t>(b)]},
        {true, true, false}, [b](int classes, int channels, const ModelOptions& o) {
          EfficientNetVariant variant = efficientnet_variant(b);
          variant.dropout = o.dropout.value_or(variant.dropout);
          return efficientnet(variant, classes, channels, o.drop_path.value_or(0.2));
        });
  for (int depth : {20, 32, 44, 56, 110})
    add({"cifar_resnet" + std::to_string(depth),
         "ResNet-" + std::to_string(depth) + " for 32x32 images (He et al. 2015, option A shortcut)", 32, 3, 10},
        resnet_like, [depth](int classes, int channels, const ModelOptions& o) {
          return cifar_resnet(depth, classes, channels, resnet_options(o));
        });
  add({"compact_cnn", "compact CNN for 28x28 grayscale images (Fashion-MNIST)", 28, 1, 10}, dropout_only,
      [](int classes, int channels, const ModelOptions& o) { return compact_cnn(classes, channels, o.dropout.value_or(0.3)); });
  add({"mlp", "two-layer perceptron for 28x28 images (no batch norm)", 28, 1, 10}, nothing,
      [](int classes, int channels, const ModelOptions&) { return mlp(classes, channels); });
  return entries;
}

const std::vector<Entry>& entries() {
  static const std::vector<Entry> all = make_entries();
  return all;
}

const Entry& find_entry(const std::string& name) {
  const Entry* closest = nullptr;
  int best = INT_MAX;
  std::string names;
  for (const Entry& e : entries()) {
    if (e.info.name == name) return e;
    const int d = edit_distance(name, e.info.name);
    if (d < best) best = d, closest = &e;
    names += (names.empty() ? "" : ", ") + e.info.name;
  }
  throw Error("unknown model '" + name + "'; did you mean '" + closest->info.name + "'? The models are: " + names);
}

std::unique_ptr<Module> build(const std::string& name, int num_classes, int in_channels, const ModelOptions& options) {
  const Entry& entry = find_entry(name);
  CNN_CHECK(num_classes > 0, "model ", name, ": num_classes must be positive, got ", num_classes);
  CNN_CHECK(in_channels > 0, "model ", name, ": in_channels must be positive, got ", in_channels);
  for (const auto& [setting, value] : {std::pair{"dropout", options.dropout}, std::pair{"drop_path", options.drop_path}})
    CNN_CHECK(!value || (*value >= 0 && *value < 1), "model ", name, ": ", setting, " must lie in [0, 1), got ", *value);
  return entry.build(num_classes, in_channels, options);
}

}  // namespace

const std::vector<ModelInfo>& model_catalog() {
  static const std::vector<ModelInfo> catalog = [] {
    std::vector<ModelInfo> infos;
    for (const Entry& e : entries()) infos.push_back(e.info);
    return infos;
  }();
  return catalog;
}

std::vector<std::string> model_names() {
  std::vector<std::string> names;
  for (const ModelInfo& info : model_catalog()) names.push_back(info.name);
  return names;
}

const ModelInfo& model_info(const std::string& name) { return find_entry(name).info; }

std::unique_ptr<Module> make_model(const std::string& name, int num_classes, int in_channels, uint64_t seed,
                                   const ModelOptions& options) {
  std::unique_ptr<Module> model = build(name, num_classes, in_channels, options);
  model->initialize(seed);
  return model;
}

std::unique_ptr<Module> make_model_shapes_only(const std::string& name, int num_classes, int in_channels,
                                               const ModelOptions& options) {
  return build(name, num_classes, in_channels, options);
}

}  // namespace cnn
