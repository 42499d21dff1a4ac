// torchvision's ResNets (resnet18/34/50/101/152) and the CIFAR ResNets of He et al. (2015), depth
// 6n + 2 (cifar_resnet20, 32, 44, 56, 110) with the parameter-free "option A" shortcut.
#pragma once
#include <memory>

#include "layers/sequential.h"

namespace cnn {

// Regularisation of a ResNet (all off by default, as in torchvision).
struct ResNetOptions {
  bool zero_init_residual = false;  // every block's last BN scale starts at 0
  double drop_path = 0;             // stochastic depth of block i of n: drop_path * i / (n - 1), as timm
  double dropout = 0;               // a "dropout" layer before fc (no parameters, so the names stay)
};

// ImageNet ResNet, torchvision's layout and names: conv1 (7x7, stride 2) bn1 relu maxpool (3x3,
// stride 2), layer1..layer4, avgpool, flatten, fc. depth: 18 or 34 (BasicBlock), 50, 101 or 152
// (Bottleneck, v1.5).
std::unique_ptr<Sequential> resnet(int depth, int num_classes, int in_channels, const ResNetOptions& options = {});

// CIFAR ResNet: conv1 (3x3, 16) bn1 relu, three stages of n BasicBlocks (16, 32, 64 channels; the
// later two start with stride 2), avgpool, flatten, fc. depth = 6n + 2.
std::unique_ptr<Sequential> cifar_resnet(int depth, int num_classes, int in_channels, const ResNetOptions& options = {});

}  // namespace cnn
