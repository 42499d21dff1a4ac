// The model zoo: parameter counts equal torchvision's, state_dict key lists equal torchvision's
// (fixtures), the registry's names and errors, and the shape pass (output shapes and MACs).
#include <doctest/doctest.h>

#include <fstream>
#include <sstream>

#include "engine/cnn.h"
#include "layers/blocks/mbconv.h"
#include "layers/registry.h"
#include "layers/shape_trace.h"

using namespace cnn;

namespace {
// PyTorch's layout of a shape of ours: conv weights [O, KH, KW, I] -> [O, I, KH, KW].
std::string pytorch_shape(const Shape& s) {
  if (s.rank() != 4) return s.str();
  return Shape{s[0], s[3], s[1], s[2]}.str();
}

std::vector<std::string> fixture_lines(const std::string& model) {
  const std::string path = std::string(CNN_LAYERS_FIXTURES) + "/" + model + "_keys.txt";
  std::ifstream in(path);
  REQUIRE_MESSAGE(in.good(), "cannot read ", path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);)
    if (!line.empty() && line[0] != '#') lines.push_back(line);
  return lines;
}

void check_against_fixture(const std::string& model) {
  const std::vector<std::string> expected = fixture_lines(model);
  const auto net = make_model_shapes_only(model, 1000, 3);
  const std::vector<StateEntry> state = net->state_dict();
  CHECK(state.size() == expected.size());
  for (size_t i = 0; i < std::min(state.size(), expected.size()); ++i) {
    const std::string ours = state[i].name + " " + pytorch_shape(state[i].shape);
    if (ours != expected[i]) {
      FAIL_CHECK("key ", i, ": ours '", ours, "', torchvision '", expected[i], "'");
      break;
    }
  }
}
}  // namespace

TEST_CASE("parameter counts equal torchvision's (1000 classes)") {
  const std::vector<std::pair<std::string, int64_t>> counts = {
      {"resnet18", 11689512},        {"resnet34", 21797672},        {"resnet50", 25557032},
      {"resnet101", 44549160},       {"resnet152", 60192808},       {"vgg11", 132863336},
      {"vgg11_bn", 132868840},       {"vgg13", 133047848},          {"vgg16", 138357544},
      {"vgg16_bn", 138365992},       {"vgg19", 143667240},          {"vgg19_bn", 143678248},
      {"efficientnet_b0", 5288548},  {"efficientnet_b1", 7794184},  {"efficientnet_b2", 9109994},
      {"efficientnet_b3", 12233232}, {"efficientnet_b4", 19341616}, {"efficientnet_b5", 30389784},
      {"efficientnet_b6", 43040704}, {"efficientnet_b7", 66347960}};
  for (const auto& [name, count] : counts) CHECK_MESSAGE(make_model_shapes_only(name, 1000, 3)->parameter_count() == count, name);
}

TEST_CASE("parameter counts of the small models") {
  // He et al. (2015): 0.27 M and 0.85 M parameters (option A shortcuts add none).
  CHECK(make_model_shapes_only("cifar_resnet20", 10, 3)->parameter_count() == 269722);
  CHECK(make_model_shapes_only("cifar_resnet56", 10, 3)->parameter_count() == 853018);
  // conv 1->32 (288) + BN (64) + conv 32->64 (18432) + BN (128) + fc 3136->128 (401536) + fc 128->10 (1290)
  CHECK(make_model_shapes_only("compact_cnn", 10, 1)->parameter_count() == 421738);
}

TEST_CASE("num_classes and in_channels change only the first conv and the head") {
  const int64_t base = make_model_shapes_only("resnet50", 1000, 3)->parameter_count();
  CHECK(make_model_shapes_only("resnet50", 10, 3)->parameter_count() == base - 990 * 2048 - 990);
  CHECK(make_model_shapes_only("resnet50", 1000, 1)->parameter_count() == base - 2 * 64 * 49);
  const auto gray = make_model_shapes_only("efficientnet_b0", 1000, 1);
  CHECK(gray->state_dict()[0].shape == Shape{32, 3, 3, 1});
}

TEST_CASE("state_dict keys and shapes match torchvision's resnet18") { check_against_fixture("resnet18"); }
TEST_CASE("state_dict keys and shapes match torchvision's vgg11_bn") { check_against_fixture("vgg11_bn"); }
TEST_CASE("state_dict keys and shapes match torchvision's efficientnet_b0") { check_against_fixture("efficientnet_b0"); }

TEST_CASE("EfficientNet's channel rounding, depth scaling and stochastic depth as torchvision") {
  CHECK(make_divisible(32 * 1.1) == 32);
  CHECK(make_divisible(16 * 1.2) == 24);  // 16 would be below 90% of 19.2
  CHECK(make_divisible(24 * 1.4) == 32);
  CHECK(make_divisible(40 * 1.8) == 72);
  CHECK(make_divisible(1) == 8);
  CHECK(make_divisible(11.9) == 16);  // 8 would be below 90% of 11.9
  const auto b0 = make_model_shapes_only("efficientnet_b0", 1000, 3);
  // 16 blocks; block i drops with 0.2 * i / 16
  const auto sd = [&](const std::string& path) {
    return dynamic_cast<MBConv&>(b0->submodule(path)).spec().stochastic_depth;
  };
  CHECK(sd("features.1.0") == 0.0);
  CHECK(sd("features.2.1") == doctest::Approx(0.2 * 2 / 16));
  CHECK(sd("features.7.0") == doctest::Approx(0.2 * 15 / 16));
  CHECK(!dynamic_cast<MBConv&>(b0->submodule("features.2.0")).has_residual());
  CHECK(dynamic_cast<MBConv&>(b0->submodule("features.2.1")).has_residual());
  const auto b3 = make_model_shapes_only("efficientnet_b3", 1000, 3);
  CHECK(b3->submodule("features.6").children().size() == 6);  // ceil(4 * 1.4)
  CHECK(b3->submodule("features.8.0").state_dict()[0].shape == Shape{1536, 1, 1, 384});
}

TEST_CASE("the registry lists its models and refuses unknown names with a suggestion") {
  const std::vector<std::string> names = model_names();
  CHECK(names.size() == 5 + 8 + 8 + 5 + 2);
  CHECK(std::find(names.begin(), names.end(), "vgg16_bn") != names.end());
  CHECK(std::find(names.begin(), names.end(), "cifar_resnet56") != names.end());
  CHECK(model_info("compact_cnn").in_channels == 1);
  CHECK(model_info("efficientnet_b3").input_size == 300);
  CHECK_THROWS_WITH_AS(make_model("resnet51", 10, 3, 0), doctest::Contains("did you mean 'resnet50'?"), Error);
  CHECK_THROWS_WITH_AS(make_model("efficientnet-b0", 10, 3, 0), doctest::Contains("did you mean 'efficientnet_b0'?"),
                       Error);
  CHECK_THROWS_WITH_AS(make_model("vgg", 10, 3, 0), doctest::Contains("vgg11, vgg11_bn"), Error);
  CHECK_THROWS_WITH_AS(make_model("resnet18", 0, 3, 0), doctest::Contains("num_classes must be positive"), Error);
}

TEST_CASE("the shape pass gives output shapes and torchvision's MAC figures") {
  // torchvision's documented GFLOPS (which count multiply-accumulates) at 224x224: conv and linear MACs.
  const std::vector<std::pair<std::string, double>> gmacs = {
      {"resnet18", 1.81}, {"resnet50", 4.09}, {"resnet152", 11.51}, {"vgg16", 15.47}, {"efficientnet_b0", 0.39}};
  for (const auto& [name, expected] : gmacs) {
    const ShapeTrace trace = trace_shapes(*make_model_shapes_only(name, 1000, 3), Shape{1, 224, 224, 3});
    CHECK(trace.output() == Shape{1, 1000});
    CHECK_MESSAGE(static_cast<double>(trace.total_macs()) / 1e9 == doctest::Approx(expected).epsilon(0.015), name);
  }
}

TEST_CASE("the shape pass records every module with its path, shape and counts") {
  const auto model = make_model_shapes_only("resnet18", 10, 3);
  const ShapeTrace trace = trace_shapes(*model, Shape{2, 64, 64, 3});
  CHECK(trace.output() == Shape{2, 10});
  CHECK(trace.total_params() == model->parameter_count());
  const auto row = [&](const std::string& name) {
    for (const LayerSummary& r : trace.layers())
      if (r.name == name) return r;
    FAIL("no row " << name);
    return LayerSummary{};
  };
  CHECK(row("conv1").output == Shape{2, 32, 32, 64});
  CHECK(row("conv1").macs == 2 * 32 * 32 * 64 * 7 * 7 * 3);
  CHECK(row("maxpool").output == Shape{2, 16, 16, 64});
  CHECK(row("layer2.0.downsample.0").output == Shape{2, 8, 8, 128});
  CHECK(row("layer4").output == Shape{2, 2, 2, 512});
  CHECK(row("layer4.1").depth == 2);
  CHECK(!row("layer4.1").leaf);
  CHECK(row("fc").params == 512 * 10 + 10);
  // Container rows add up their children.
  CHECK(row("layer1").macs == row("layer1.0").macs + row("layer1.1").macs);
}

TEST_CASE("the shape pass names the layer where an input does not fit") {
  const auto model = make_model_shapes_only("resnet18", 10, 3);
  CHECK_THROWS_WITH_AS(trace_shapes(*model, Shape{1, 32, 32, 1}), doctest::Contains("conv1 (Conv2d): expects NHWC input with 3 channels"),
                       Error);
  const auto vgg = make_model_shapes_only("vgg11", 10, 3);
  CHECK_THROWS_WITH_AS(trace_shapes(*vgg, Shape{1, 16, 16, 3}), doctest::Contains("features.20 (MaxPool2d)"), Error);
}
