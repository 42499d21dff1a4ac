// Pooling modules over NHWC activations: MaxPool2d, AvgPool2d (windows with PyTorch's semantics,
// including ceil_mode), AdaptiveAvgPool2d (PyTorch's bins) and Flatten ([N, ...] -> [N, rest]).
#pragma once
#include "engine/ops.h"
#include "layers/module.h"

namespace cnn {

// The window pools share their options and shape rule.
class WindowPool2d : public Module {
 public:
  Shape infer_shape(const Shape& input, ShapeTrace& trace) const override;
  const Pool2dOptions& options() const { return options_; }

 protected:
  WindowPool2d(std::string type_name, int kernel, int stride, int padding, bool ceil_mode);
  Pool2dOptions options_;
};

class MaxPool2d : public WindowPool2d {
 public:
  // stride 0 means the kernel size (PyTorch's default)
  explicit MaxPool2d(int kernel, int stride = 0, int padding = 0, bool ceil_mode = false);

 protected:
  Tensor compute(const Tensor& x) override;
};

class AvgPool2d : public WindowPool2d {
 public:
  explicit AvgPool2d(int kernel, int stride = 0, int padding = 0, bool ceil_mode = false,
                     bool count_include_pad = true);

 protected:
  Tensor compute(const Tensor& x) override;
};

class AdaptiveAvgPool2d : public Module {
 public:
  AdaptiveAvgPool2d(int out_h, int out_w);
  Shape infer_shape(const Shape& input, ShapeTrace& trace) const override;

 protected:
  Tensor compute(const Tensor& x) override;

 private:
  int out_h_, out_w_;
};

// [N, d1, d2, ...] -> [N, d1 * d2 * ...]. An NHWC feature map [N, H, W, C] is flattened in PyTorch's
// (C, H, W) order (a transpose, when H * W > 1), so that a Linear after it takes torchvision's
// weights unchanged (VGG's classifier.0.weight, for instance).
class Flatten : public Module {
 public:
  Flatten();
  Shape infer_shape(const Shape& input, ShapeTrace& trace) const override;

 protected:
  Tensor compute(const Tensor& x) override;
};

}  // namespace cnn
