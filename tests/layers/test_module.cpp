// The module tree without running ops: names and order, roles and head tags, initialisation
// (deterministic per seed, torchvision's schemes), modes, freezing, dtype and parameter replacement.
#include <doctest/doctest.h>

#include <cmath>
#include <set>

#include "engine/cnn.h"
#include "layers/batch_norm.h"
#include "layers/blocks/basic_block.h"
#include "layers/blocks/bottleneck.h"
#include "layers/conv2d.h"
#include "layers/linear.h"
#include "layers/registry.h"
#include "layers/sequential.h"

using namespace cnn;

namespace {
std::vector<std::string> names_of(const std::vector<NamedParameter>& params) {
  std::vector<std::string> names;
  for (const NamedParameter& p : params) names.push_back(p.name);
  return names;
}

double max_abs(const Tensor& t) {
  double m = 0;
  for (double x : t.to_doubles()) m = std::max(m, std::fabs(x));
  return m;
}

double stddev_of(const Tensor& t) {
  const std::vector<double> v = t.to_doubles();
  double sum = 0, sq = 0;
  for (double x : v) sum += x, sq += x * x;
  const double mean = sum / static_cast<double>(v.size());
  return std::sqrt(sq / static_cast<double>(v.size()) - mean * mean);
}
}  // namespace

TEST_CASE("a block names its parameters and buffers as torchvision, in state_dict order") {
  BasicBlock block(ResidualSpec{.in_channels = 4, .planes = 8, .stride = 2});
  std::vector<std::string> keys;
  for (const StateEntry& e : block.state_dict()) keys.push_back(e.name + (e.is_parameter ? "" : " (buffer)"));
  const std::vector<std::string> expected = {
      "conv1.weight", "bn1.weight", "bn1.bias", "bn1.running_mean (buffer)", "bn1.running_var (buffer)",
      "bn1.num_batches_tracked (buffer)", "conv2.weight", "bn2.weight", "bn2.bias", "bn2.running_mean (buffer)",
      "bn2.running_var (buffer)", "bn2.num_batches_tracked (buffer)", "downsample.0.weight", "downsample.1.weight",
      "downsample.1.bias", "downsample.1.running_mean (buffer)", "downsample.1.running_var (buffer)",
      "downsample.1.num_batches_tracked (buffer)"};
  CHECK(keys == expected);
  CHECK(names_of(block.named_parameters()) ==
        std::vector<std::string>{"conv1.weight", "bn1.weight", "bn1.bias", "conv2.weight", "bn2.weight", "bn2.bias",
                                 "downsample.0.weight", "downsample.1.weight", "downsample.1.bias"});
  CHECK(block.named_buffers().size() == 9);
  // NHWC conv weights: [out, kh, kw, in / groups]
  CHECK(block.state_dict()[0].shape == Shape{8, 3, 3, 4});
  CHECK(block.state_dict()[5].shape == Shape{});
  CHECK(block.parameter_count() == 8 * 9 * 4 + 2 * 8 + 8 * 9 * 8 + 2 * 8 + 8 * 4 + 2 * 8);
}

TEST_CASE("a block that keeps its shape has no downsample branch") {
  Bottleneck block(ResidualSpec{.in_channels = 16, .planes = 4});
  for (const NamedParameter& p : block.named_parameters()) CHECK(p.name.find("downsample") == std::string::npos);
  BasicBlock padded(ResidualSpec{.in_channels = 4, .planes = 8, .stride = 2, .shortcut = Shortcut::zero_pad});
  for (const NamedParameter& p : padded.named_parameters()) CHECK(p.name.find("downsample") == std::string::npos);
}

TEST_CASE("parameter roles and head tags select weight decay, frozen backbones and head groups") {
  const auto model = make_model_shapes_only("resnet18", 10, 3);
  int heads = 0;
  for (const NamedParameter& p : model->named_parameters()) {
    const bool is_norm = p.name.rfind("bn", 0) == 0 || p.name.find(".bn") != std::string::npos ||
                         p.name.find("downsample.1") != std::string::npos;
    if (is_norm) CHECK_MESSAGE(!p.decays(), p.name);
    if (p.name == "fc.bias") CHECK(p.role == ParamRole::bias);
    if (p.name == "fc.weight") CHECK(p.role == ParamRole::linear_weight);
    if (p.name == "conv1.weight") CHECK(p.role == ParamRole::conv_weight);
    CHECK(p.in_head == (p.name.rfind("fc.", 0) == 0));
    heads += p.in_head;
  }
  CHECK(heads == 2);
  const auto effnet = make_model_shapes_only("efficientnet_b0", 10, 3);
  std::set<std::string> head_names;
  for (const NamedParameter& p : effnet->named_parameters())
    if (p.in_head) head_names.insert(p.name);
  CHECK(head_names == std::set<std::string>{"classifier.1.weight", "classifier.1.bias"});
}

TEST_CASE("initialize is deterministic per seed and differs across seeds") {
  const auto a = make_model("cifar_resnet20", 10, 3, 7);
  const auto b = make_model("cifar_resnet20", 10, 3, 7);
  const auto c = make_model("cifar_resnet20", 10, 3, 8);
  const std::vector<Tensor> pa = a->parameters(), pb = b->parameters(), pc = c->parameters();
  REQUIRE(pa.size() == pb.size());
  for (size_t i = 0; i < pa.size(); ++i) CHECK(pa[i].to_doubles() == pb[i].to_doubles());
  CHECK(pa[0].to_doubles() != pc[0].to_doubles());
  // Two parameters of one shape in one model get different draws.
  CHECK(a->submodule("layer1.0.conv1").parameters()[0].to_doubles() !=
        a->submodule("layer1.0.conv2").parameters()[0].to_doubles());
  for (const Tensor& p : pa) {
    CHECK(p.requires_grad());
    CHECK(p.dtype() == DType::f32);
  }
}

TEST_CASE("initialisation follows torchvision's schemes") {
  Sequential net;
  auto* conv = net.push_back(std::make_unique<Conv2d>(Conv2dSpec{.in_channels = 16, .out_channels = 64, .kernel = 3,
                                                                 .stride = 1, .padding = 1, .groups = 1, .bias = true}));
  auto* bn = net.push_back(std::make_unique<BatchNorm2d>(64));
  auto* fc = net.push_back(std::make_unique<Linear>(400, 50));
  net.initialize(3);
  // Kaiming normal, fan_out = 64 * 3 * 3
  CHECK(stddev_of(conv->weight()) == doctest::Approx(std::sqrt(2.0 / (64 * 9))).epsilon(0.05));
  CHECK(conv->bias().to_doubles() == std::vector<double>(64, 0.0));
  CHECK(bn->weight().to_doubles() == std::vector<double>(64, 1.0));
  CHECK(bn->bias().to_doubles() == std::vector<double>(64, 0.0));
  CHECK(bn->running_mean().to_doubles() == std::vector<double>(64, 0.0));
  CHECK(bn->running_var().to_doubles() == std::vector<double>(64, 1.0));
  CHECK(bn->num_batches_tracked() == 0);
  CHECK(bn->state_dict()[4].tensor.dtype() == DType::i64);
  // PyTorch's Linear default: U(-1/sqrt(400), 1/sqrt(400)), standard deviation bound / sqrt(3)
  CHECK(stddev_of(fc->weight()) == doctest::Approx(1.0 / 20.0 / std::sqrt(3.0)).epsilon(0.05));
  CHECK(max_abs(fc->weight()) <= 1.0 / 20.0);
}

TEST_CASE("model-specific initialisation: VGG and EfficientNet heads, zero-init residual") {
  const auto effnet = make_model("efficientnet_b0", 100, 3, 1);
  const Tensor w = effnet->submodule("classifier.1").parameters()[0];
  CHECK(max_abs(w) <= 0.1);  // U(-1/sqrt(100), 1/sqrt(100))
  CHECK(max_abs(w) > 0.09);
  CHECK(effnet->submodule("classifier.1").parameters()[1].to_doubles() == std::vector<double>(100, 0.0));
  // EfficientNet-B0 uses PyTorch's default BatchNorm; B5-B7 the TensorFlow-ported eps 1e-3, momentum 0.01.
  CHECK(dynamic_cast<BatchNorm2d&>(effnet->submodule("features.0.1")).eps() == 1e-5);
  const auto b7 = make_model_shapes_only("efficientnet_b7", 1000, 3);
  auto& b7_bn = dynamic_cast<BatchNorm2d&>(b7->submodule("features.0.1"));
  CHECK(b7_bn.eps() == 1e-3);
  CHECK(b7_bn.momentum() == 0.01);

  Bottleneck block(ResidualSpec{.in_channels = 8, .planes = 2, .stride = 1, .shortcut = Shortcut::projection,
                                .zero_init_residual = true});
  block.initialize(5);
  CHECK(block.submodule("bn3").parameters()[0].to_doubles() == std::vector<double>(8, 0.0));
  CHECK(block.submodule("bn1").parameters()[0].to_doubles() == std::vector<double>(2, 1.0));
}

TEST_CASE("train/eval, freezing, compute dtype and device apply to the whole tree") {
  const auto model = make_model("cifar_resnet20", 10, 3, 1);
  CHECK(model->training());
  model->eval();
  for (auto& [name, m] : model->named_modules()) CHECK_MESSAGE(!m->training(), name);
  model->train();
  CHECK(model->submodule("layer3.2.bn2").training());

  model->set_requires_grad(false);
  for (const Tensor& p : model->parameters()) CHECK(!p.requires_grad());
  model->submodule("fc").set_requires_grad(true);
  for (const NamedParameter& p : model->named_parameters()) CHECK(p.tensor.requires_grad() == p.in_head);

  model->to(DType::bf16);
  CHECK(model->submodule("layer2.0.conv1").compute_dtype() == DType::bf16);
  for (const Tensor& p : model->parameters()) CHECK(p.dtype() == DType::f32);  // master parameters stay f32
  CHECK_THROWS_WITH_AS(model->to(DType::i32), doctest::Contains("floating"), Error);
  model->to(Device::cpu());
  CHECK(model->parameters()[0].device() == Device::cpu());
}

TEST_CASE("gradient checkpointing is switched on for residual blocks only") {
  const auto model = make_model_shapes_only("resnet18", 10, 3);
  model->set_gradient_checkpointing(true);
  int on = 0;
  for (auto& [name, m] : model->named_modules()) {
    const bool is_block = m->type_name() == "BasicBlock";
    CHECK_MESSAGE(m->gradient_checkpointing() == is_block, name);
    on += m->gradient_checkpointing();
  }
  CHECK(on == 8);
  const auto effnet = make_model_shapes_only("efficientnet_b0", 10, 3);
  effnet->set_gradient_checkpointing(true);
  CHECK(effnet->submodule("features.1.0").gradient_checkpointing());
  CHECK(!effnet->submodule("features.1.0.block").gradient_checkpointing());
}

TEST_CASE("set_parameters replaces parameters in order and checks their shapes") {
  Linear fc(3, 2);
  const Tensor w = Tensor::ones({2, 3}), b = Tensor::zeros({2});
  fc.set_parameters({w, b});
  CHECK(fc.weight().id() == w.id());
  CHECK_THROWS_WITH_AS(fc.set_parameters({b, w}), doctest::Contains("parameter 'weight' has shape [2, 3]"), Error);
  CHECK_THROWS_WITH_AS(fc.set_parameters({w}), doctest::Contains("got 1 tensors for 2 parameters"), Error);
}

TEST_CASE("errors say what is wrong and what to do") {
  Linear fc(3, 2);
  CHECK_THROWS_WITH_AS(fc(Tensor::ones({1, 3})), doctest::Contains("call initialize(seed)"), Error);
  const auto model = make_model_shapes_only("resnet18", 10, 3);
  CHECK_THROWS_WITH_AS(model->submodule("layer1.7"), doctest::Contains("has children: 0, 1"), Error);
  CHECK_THROWS_WITH_AS(Conv2d(6, 4, 3, 1, 4), doctest::Contains("not both divisible by 4 groups"), Error);
}
