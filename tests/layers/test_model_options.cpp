// ModelOptions of the model zoo: dropout, stochastic depth (drop path) and zero-initialised residual
// blocks change the built model the way torchvision/timm do, keep torchvision's state_dict names,
// and settings an architecture has no place for are refused.
#include <doctest/doctest.h>

#include <cmath>

#include "engine/cnn.h"
#include "layers/blocks/basic_block.h"
#include "layers/dropout.h"
#include "layers/registry.h"

using namespace cnn;

namespace {
double drop_probability(Module& model, const std::string& path) { return dynamic_cast<RandomDrop&>(model.submodule(path)).p(); }

std::vector<std::string> state_names(const Module& model) {
  std::vector<std::string> names;
  for (const StateEntry& e : model.state_dict()) names.push_back(e.name);
  return names;
}

bool has_child(Module& model, const std::string& path) {
  for (const auto& [name, m] : model.named_modules())
    if (name == path) return true;
  return false;
}
}  // namespace

TEST_CASE("model options: dropout replaces the architecture's default and keeps the state_dict names") {
  const auto vgg_default = make_model_shapes_only("vgg11", 10, 3);
  CHECK(drop_probability(*vgg_default, "classifier.2") == 0.5);  // torchvision's default
  const auto vgg = make_model_shapes_only("vgg11", 10, 3, {.dropout = 0.2});
  CHECK(drop_probability(*vgg, "classifier.2") == 0.2);
  CHECK(drop_probability(*vgg, "classifier.5") == 0.2);
  CHECK(state_names(*vgg) == state_names(*vgg_default));

  const auto effnet = make_model_shapes_only("efficientnet_b0", 10, 3, {.dropout = 0.4});
  CHECK(drop_probability(*effnet, "classifier.0") == 0.4);
  CHECK(drop_probability(*make_model_shapes_only("efficientnet_b3", 10, 3), "classifier.0") == 0.3);

  // A ResNet has no dropout in torchvision: a positive value adds one between flatten and fc.
  const auto plain = make_model_shapes_only("resnet18", 10, 3);
  const auto with_dropout = make_model_shapes_only("resnet18", 10, 3, {.dropout = 0.25});
  CHECK(!has_child(*plain, "dropout"));
  CHECK(drop_probability(*with_dropout, "dropout") == 0.25);
  CHECK(state_names(*with_dropout) == state_names(*plain));
  CHECK(with_dropout->parameter_count() == plain->parameter_count());

  CHECK(drop_probability(*make_model_shapes_only("compact_cnn", 10, 1, {.dropout = 0.0}), "classifier.2") == 0.0);
}

TEST_CASE("model options: stochastic depth rises linearly over the blocks") {
  // ResNet-18 has 8 blocks: block i of 8 drops with drop_path * i / 7, as timm's drop_path_rate.
  const auto resnet = make_model_shapes_only("resnet18", 10, 3, {.drop_path = 0.14});
  CHECK(!has_child(*resnet, "layer1.0.drop_path"));  // the first block's rate is 0
  CHECK(drop_probability(*resnet, "layer1.1.drop_path") == doctest::Approx(0.02));
  CHECK(drop_probability(*resnet, "layer3.0.drop_path") == doctest::Approx(0.08));
  CHECK(drop_probability(*resnet, "layer4.1.drop_path") == doctest::Approx(0.14));
  CHECK(state_names(*resnet) == state_names(*make_model_shapes_only("resnet18", 10, 3)));

  // EfficientNet: torchvision's 0.2 * block / total_blocks by default (B0 has 16 blocks).
  const auto b0 = make_model_shapes_only("efficientnet_b0", 10, 3);
  CHECK(drop_probability(*b0, "features.7.0.stochastic_depth") == doctest::Approx(0.2 * 15 / 16));
  const auto b0_custom = make_model_shapes_only("efficientnet_b0", 10, 3, {.drop_path = 0.3});
  CHECK(drop_probability(*b0_custom, "features.7.0.stochastic_depth") == doctest::Approx(0.3 * 15 / 16));
  CHECK(drop_probability(*b0_custom, "features.1.0.stochastic_depth") == 0.0);
}

TEST_CASE("model options: a dropped residual branch leaves relu(shortcut), eval mode keeps every branch") {
  constexpr int64_t kBatch = 64;
  BasicBlock block(ResidualSpec{.in_channels = 4, .planes = 4, .drop_path = 0.5});
  block.initialize(3);
  const Tensor x = Tensor::randn({kBatch, 5, 5, 4}, 11);
  const std::vector<double> in = x.to_doubles();
  const std::vector<double> out = block(x).to_doubles();
  const size_t per_sample = 5 * 5 * 4;
  int dropped = 0;
  for (size_t n = 0; n < static_cast<size_t>(kBatch); ++n) {
    bool equals_relu_of_input = true;
    for (size_t i = n * per_sample; i < (n + 1) * per_sample; ++i)
      equals_relu_of_input = equals_relu_of_input && out[i] == std::max(in[i], 0.0);
    dropped += equals_relu_of_input;
  }
  MESSAGE(dropped << " of " << kBatch << " samples dropped at p = 0.5");
  CHECK(dropped > 16);
  CHECK(dropped < 48);

  // Eval mode: the same block is the fused, deterministic path of a block without stochastic depth
  // (which has seen the same training batch, so its running statistics are the same).
  BasicBlock reference(ResidualSpec{.in_channels = 4, .planes = 4});
  reference.initialize(3);
  reference(x);
  block.eval();
  reference.eval();
  CHECK(block(x).to_doubles() == reference(x).to_doubles());

  // The backward pass reaches the input through both branches of the kept samples.
  block.train();
  Tape tape;
  const Tensor leaf = x.detach().requires_grad_();
  {
    Tape::Recording rec(tape);
    const Tensor loss = sum(block(leaf));
    tape.backward(loss);
  }
  REQUIRE(leaf.grad().defined());
  CHECK(std::isfinite(sum(abs(leaf.grad())).item()));
}

TEST_CASE("model options: zero_init_residual starts each block as relu(shortcut)") {
  const auto net = make_model("cifar_resnet20", 10, 3, 1, {.zero_init_residual = true});
  for (const NamedParameter& p : net->named_parameters()) {
    const bool last_bn_weight = p.name.find(".bn2.weight") != std::string::npos;
    if (last_bn_weight) CHECK_MESSAGE(sum(abs(p.tensor)).item() == 0.0, p.name);
  }
  CHECK(sum(abs(make_model("cifar_resnet20", 10, 3, 1)->submodule("layer1.0.bn2").parameters()[0])).item() == 16.0);
  // layer1.0 keeps the shape, so its output is relu(input) whatever the input.
  net->eval();
  const Tensor x = Tensor::randn({2, 6, 6, 16}, 4);
  CHECK(net->submodule("layer1.0")(x).to_doubles() == relu(x).to_doubles());
}

TEST_CASE("model options: settings an architecture has no place for are refused by name") {
  CHECK_THROWS_WITH_AS(make_model_shapes_only("mlp", 10, 1, {.dropout = 0.1}),
                       doctest::Contains("model mlp: dropout is not available"), Error);
  CHECK_THROWS_WITH_AS(make_model_shapes_only("vgg16_bn", 10, 3, {.drop_path = 0.1}),
                       doctest::Contains("model vgg16_bn: drop_path is not available"), Error);
  CHECK_THROWS_WITH_AS(make_model_shapes_only("efficientnet_b0", 10, 3, {.zero_init_residual = true}),
                       doctest::Contains("zero_init_residual is not available"), Error);
  CHECK_THROWS_WITH_AS(make_model_shapes_only("resnet50", 10, 3, {.dropout = 1.0}),
                       doctest::Contains("dropout must lie in [0, 1)"), Error);
  CHECK_NOTHROW(make_model_shapes_only("vgg16_bn", 10, 3, {.drop_path = 0.0}));  // zero is no stochastic depth
  CHECK_NOTHROW(make_model_shapes_only("mlp", 10, 1, {.dropout = 0.0}));          // and no dropout
}
