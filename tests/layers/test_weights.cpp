// Weights I/O: bitwise HDF5 and safetensors round trips, torchvision's OIHW layout at the
// safetensors boundary, strict loading errors, and partial loading onto a new head.
#include <doctest/doctest.h>

#include <unistd.h>

#include <filesystem>

#include "engine/io/safetensors.h"
#include "error_message.h"
#include "layers/pool.h"
#include "layers/registry.h"
#include "layers/weights.h"

using namespace cnn;
using cnn::testing::error_message;

namespace {
std::filesystem::path temp_path(const std::string& name) {
  return std::filesystem::temp_directory_path() / ("cnn_test_weights_" + std::to_string(::getpid()) + "_" + name);
}

std::vector<std::vector<double>> state_values(const Module& m) {
  std::vector<std::vector<double>> v;
  for (const StateEntry& e : m.state_dict()) v.push_back(e.tensor.to_doubles());
  return v;
}
}  // namespace

TEST_CASE("weights round trip bitwise through HDF5 and safetensors") {
  for (const char* ext : {".h5", ".safetensors"}) {
    INFO(ext);
    const auto path = temp_path(std::string("roundtrip") + ext);
    const auto a = make_model("cifar_resnet20", 10, 3, 1);
    auto b = make_model("cifar_resnet20", 10, 3, 2);
    CHECK(state_values(*a) != state_values(*b));
    save_weights(*a, path);
    const WeightsReport r = load_weights(*b, path);
    CHECK(r.complete());
    CHECK(r.loaded == a->state_dict().size());
    CHECK(state_values(*a) == state_values(*b));
    std::filesystem::remove(path);
  }
}

TEST_CASE("safetensors weights use torchvision's OIHW conv layout") {
  const auto path = temp_path("layout.safetensors");
  const auto m = make_model("cifar_resnet20", 10, 3, 3);
  save_weights(*m, path);
  const io::SafetensorsFile f = io::load_safetensors(path);
  const Tensor conv = f.tensor("conv1.weight");
  CHECK(conv.shape() == Shape{16, 3, 3, 3});  // [O, I, KH, KW]
  // Element (o=1, i=2, kh=0, kw=1) of the file is element (1, 0, 1, 2) of the engine's [O,KH,KW,I].
  const Tensor engine = m->state_dict()[0].tensor;
  CHECK(conv.to_doubles()[((1 * 3 + 2) * 3 + 0) * 3 + 1] == engine.to_doubles()[((1 * 3 + 0) * 3 + 1) * 3 + 2]);
  std::filesystem::remove(path);
}

TEST_CASE("strict loading refuses another head, partial loading reports it and loads the rest") {
  const auto path = temp_path("head.h5");
  const auto source = make_model("cifar_resnet20", 100, 3, 4);
  save_weights(*source, path);
  auto target = make_model("cifar_resnet20", 10, 3, 5);
  const std::string message = error_message([&] { load_weights(*target, path); });
  CHECK(message.find("fc.weight: file [100, 64] vs model [10, 64]") != std::string::npos);
  CHECK(message.find("the file's classifier has 100 outputs and this model's 10: set [model] num_classes = 100") !=
        std::string::npos);
  CHECK(message.find("written for another model") == std::string::npos);  // the class count explains it all
  const WeightsReport r = load_weights(*target, path, /*only_matching_shapes=*/true);
  CHECK(r.mismatched.size() == 2);  // fc.weight and fc.bias
  CHECK(r.missing.empty());
  CHECK(r.unexpected.empty());
  CHECK(r.loaded == target->state_dict().size() - 2);
  CHECK(target->state_dict()[0].tensor.to_doubles() == source->state_dict()[0].tensor.to_doubles());
  CHECK_THROWS_WITH_AS(load_weights(*target, temp_path("missing.h5")), doctest::Contains("missing.h5"), Error);
  CHECK_THROWS_WITH_AS(save_weights(*target, temp_path("weights.pt")), doctest::Contains("unknown extension"), Error);
  std::filesystem::remove(path);
}

TEST_CASE("a weights file for grey images: shapes in the file's layout and in_channels named") {
  // Before: "conv1.weight: file [16, 3, 3, 1] vs model [16, 3, 3, 3]" (the engine's internal layout
  // for a file that holds [16, 1, 3, 3]) and advice about the model name and num_classes.
  const auto grey = make_model("cifar_resnet20", 10, 1, 8);
  const auto path = temp_path("grey.safetensors");
  save_weights(*grey, path);
  auto colour = make_model("cifar_resnet20", 10, 3, 9);
  const std::string message = error_message([&] { load_weights(*colour, path); });
  CHECK(message.find("conv1.weight: file [16, 1, 3, 3] vs model [16, 3, 3, 3] (O, I, kH, kW)") != std::string::npos);
  CHECK(message.find("takes 1-channel images and this one 3: set [model] in_channels = 1") != std::string::npos);
  CHECK(message.find("num_classes") == std::string::npos);
  // The engine's own .h5 layout is printed as it is stored, and said to be.
  const auto h5 = temp_path("grey.h5");
  save_weights(*grey, h5);
  CHECK(error_message([&] { load_weights(*colour, h5); }).find("file [16, 3, 3, 1] vs model [16, 3, 3, 3] (O, kH, kW, I)") !=
        std::string::npos);
  std::filesystem::remove(path);
  std::filesystem::remove(h5);
}

TEST_CASE("integer data for a float tensor (or floats for an integer buffer) is refused, naming the tensor") {
  const auto m = make_model("cifar_resnet20", 10, 3, 6);
  const auto path = temp_path("dtypes.safetensors");
  save_weights(*m, path);
  io::SafetensorsFile f = io::load_safetensors(path);
  for (auto& [name, t] : f.tensors)
    if (name == "conv1.weight") t = t.to(DType::i32);
  io::save_safetensors(path, f.tensors, f.metadata);
  auto target = make_model("cifar_resnet20", 10, 3, 7);
  CHECK_THROWS_WITH_AS(load_weights(*target, path), doctest::Contains("tensor 'conv1.weight' holds i32 values but the model's is f32"),
                       Error);
  // f16 weights into the f32 model are fine.
  for (auto& [name, t] : f.tensors)
    if (name == "conv1.weight") t = t.to(DType::f16);
  io::save_safetensors(path, f.tensors, f.metadata);
  CHECK(load_weights(*target, path).complete());
  std::filesystem::remove(path);
}

TEST_CASE("Flatten orders an NHWC feature map's features as PyTorch does: (C, H, W)") {
  Flatten flatten;
  // x[0, h, w, c] = 100 c + 10 h + w
  std::vector<float> values;
  for (int h = 0; h < 2; ++h)
    for (int w = 0; w < 3; ++w)
      for (int c = 0; c < 2; ++c) values.push_back(static_cast<float>(100 * c + 10 * h + w));
  const Tensor y = flatten(Tensor::from_vector(values, {1, 2, 3, 2}));
  CHECK(y.to_doubles() == std::vector<double>{0, 1, 2, 10, 11, 12, 100, 101, 102, 110, 111, 112});
}
