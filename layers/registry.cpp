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

using Builder = std::function<std::unique_ptr<Module>(int num_classes, int in_channels)>;

struct Entry {
  ModelInfo info;
  Builder build;
};

std::vector<Entry> make_entries() {
  std::vector<Entry> entries;
  for (int depth : {18, 34, 50, 101, 152})
    entries.push_back({{"resnet" + std::to_string(depth),
                        "ResNet-" + std::to_string(depth) + " (torchvision, " +
                            (depth < 50 ? "BasicBlock" : "Bottleneck v1.5") + ")"},
                       [depth](int classes, int channels) { return resnet(depth, classes, channels); }});
  for (int depth : {11, 13, 16, 19})
    for (bool bn : {false, true})
      entries.push_back({{"vgg" + std::to_string(depth) + (bn ? "_bn" : ""),
                          "VGG-" + std::to_string(depth) + (bn ? " with BatchNorm" : "") + " (torchvision)"},
                         [depth, bn](int classes, int channels) { return vgg(depth, bn, classes, channels); }});
  // The crop sizes of torchvision's EfficientNet weights (their published MACs are at these sizes).
  constexpr std::array<int, 8> kEfficientNetSizes{224, 240, 288, 300, 380, 456, 528, 600};
  for (int b = 0; b < 8; ++b)
    entries.push_back({{"efficientnet_b" + std::to_string(b), "EfficientNet-B" + std::to_string(b) + " (torchvision)",
                        kEfficientNetSizes[static_cast<size_t>(b)]},
                       [b](int classes, int channels) {
                         return efficientnet(efficientnet_variant(b), classes, channels);
                       }});
  for (int depth : {20, 32, 44, 56, 110})
    entries.push_back({{"cifar_resnet" + std::to_string(depth),
                        "ResNet-" + std::to_string(depth) + " for 32x32 images (He et al. 2015, option A shortcut)",
                        32, 3, 10},
                       [depth](int classes, int channels) { return cifar_resnet(depth, classes, channels); }});
  entries.push_back({{"compact_cnn", "compact CNN for 28x28 grayscale images (Fashion-MNIST)", 28, 1, 10},
                     [](int classes, int channels) { return compact_cnn(classes, channels); }});
  entries.push_back({{"mlp", "two-layer perceptron for 28x28 images (no batch norm)", 28, 1, 10},
                     [](int classes, int channels) { return mlp(classes, channels); }});
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

std::unique_ptr<Module> build(const std::string& name, int num_classes, int in_channels) {
  const Entry& entry = find_entry(name);
  CNN_CHECK(num_classes > 0, "model ", name, ": num_classes must be positive, got ", num_classes);
  CNN_CHECK(in_channels > 0, "model ", name, ": in_channels must be positive, got ", in_channels);
  return entry.build(num_classes, in_channels);
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

std::unique_ptr<Module> make_model(const std::string& name, int num_classes, int in_channels, uint64_t seed) {
  std::unique_ptr<Module> model = build(name, num_classes, in_channels);
  model->initialize(seed);
  return model;
}

std::unique_ptr<Module> make_model_shapes_only(const std::string& name, int num_classes, int in_channels) {
  return build(name, num_classes, in_channels);
}

}  // namespace cnn
