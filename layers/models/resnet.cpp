// ResNet builders (see resnet.h).
#include "layers/models/resnet.h"

#include <array>
#include <functional>

#include "layers/activation.h"
#include "layers/batch_norm.h"
#include "layers/blocks/basic_block.h"
#include "layers/blocks/bottleneck.h"
#include "layers/conv2d.h"
#include "layers/linear.h"
#include "layers/models/pooled_head.h"
#include "layers/pool.h"

namespace cnn {

namespace {

using BlockFactory = std::function<std::unique_ptr<ResidualBlock>(const ResidualSpec&)>;

// Builds the stages ("layerK") one after the other, numbering the blocks across the whole network
// so that the stochastic depth rate can rise linearly from the first block to the last.
class StageBuilder {
 public:
  StageBuilder(BlockFactory make_block, int in_channels, int total_blocks, Shortcut shortcut, const ResNetOptions& options)
      : make_block_(std::move(make_block)), channels_(in_channels), total_blocks_(total_blocks), shortcut_(shortcut),
        options_(options) {}

  // `blocks` blocks of width `planes`, the first with `stride`.
  std::unique_ptr<Sequential> stage(int planes, int blocks, int stride) {
    auto stage = std::make_unique<Sequential>();
    for (int b = 0; b < blocks; ++b) {
      const double depth_fraction = total_blocks_ > 1 ? static_cast<double>(index_++) / (total_blocks_ - 1) : 0.0;
      const ResidualSpec spec{.in_channels = channels_,
                              .planes = planes,
                              .stride = b == 0 ? stride : 1,
                              .shortcut = shortcut_,
                              .zero_init_residual = options_.zero_init_residual,
                              .drop_path = options_.drop_path * depth_fraction};
      channels_ = stage->push_back(make_block_(spec))->out_channels();
    }
    return stage;
  }
  int channels() const { return channels_; }

 private:
  BlockFactory make_block_;
  int channels_, total_blocks_, index_ = 0;
  Shortcut shortcut_;
  ResNetOptions options_;
};

}  // namespace

std::unique_ptr<Sequential> resnet(int depth, int num_classes, int in_channels, const ResNetOptions& options) {
  std::array<int, 4> blocks{};
  bool bottleneck = true;
  switch (depth) {
    case 18:
      blocks = {2, 2, 2, 2};
      bottleneck = false;
      break;
    case 34:
      blocks = {3, 4, 6, 3};
      bottleneck = false;
      break;
    case 50: blocks = {3, 4, 6, 3}; break;
    case 101: blocks = {3, 4, 23, 3}; break;
    case 152: blocks = {3, 8, 36, 3}; break;
    default: CNN_CHECK(false, "resnet: no ResNet of depth ", depth, "; the depths are 18, 34, 50, 101 and 152");
  }
  const BlockFactory make_block = [bottleneck](const ResidualSpec& spec) -> std::unique_ptr<ResidualBlock> {
    if (bottleneck) return std::make_unique<Bottleneck>(spec);
    return std::make_unique<BasicBlock>(spec);
  };
  auto net = std::make_unique<Sequential>("ResNet");
  net->add("conv1", std::make_unique<Conv2d>(Conv2dSpec{.in_channels = in_channels,
                                                        .out_channels = 64,
                                                        .kernel = 7,
                                                        .stride = 2,
                                                        .padding = 3}));
  net->add("bn1", std::make_unique<BatchNorm2d>(64));
  net->add("relu", std::make_unique<Activation>(ActivationKind::relu));
  net->add("maxpool", std::make_unique<MaxPool2d>(3, 2, 1));
  StageBuilder stages(make_block, 64, blocks[0] + blocks[1] + blocks[2] + blocks[3], Shortcut::projection, options);
  const std::array<int, 4> planes{64, 128, 256, 512};
  for (size_t i = 0; i < planes.size(); ++i)
    net->add("layer" + std::to_string(i + 1), stages.stage(planes[i], blocks[i], i == 0 ? 1 : 2));
  add_pooled_head(*net, 1, "fc", std::make_unique<Linear>(stages.channels(), num_classes), options.dropout);
  return net;
}

std::unique_ptr<Sequential> cifar_resnet(int depth, int num_classes, int in_channels, const ResNetOptions& options) {
  CNN_CHECK(depth >= 8 && (depth - 2) % 6 == 0, "cifar_resnet: depth ", depth,
            " is not 6n + 2 for some n >= 1 (20, 32, 44, 56 and 110 are the usual ones)");
  const int n = (depth - 2) / 6;
  const BlockFactory make_block = [](const ResidualSpec& spec) -> std::unique_ptr<ResidualBlock> {
    return std::make_unique<BasicBlock>(spec);
  };
  auto net = std::make_unique<Sequential>("CifarResNet");
  net->add("conv1", std::make_unique<Conv2d>(in_channels, 16, 3));
  net->add("bn1", std::make_unique<BatchNorm2d>(16));
  net->add("relu", std::make_unique<Activation>(ActivationKind::relu));
  StageBuilder stages(make_block, 16, 3 * n, Shortcut::zero_pad, options);
  const std::array<int, 3> planes{16, 32, 64};
  for (size_t i = 0; i < planes.size(); ++i)
    net->add("layer" + std::to_string(i + 1), stages.stage(planes[i], n, i == 0 ? 1 : 2));
  add_pooled_head(*net, 1, "fc", std::make_unique<Linear>(stages.channels(), num_classes), options.dropout);
  return net;
}

}  // namespace cnn
