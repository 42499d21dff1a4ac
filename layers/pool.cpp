// Pooling and flattening modules (see pool.h).
#include "layers/pool.h"

#include "engine/ops.h"
#include "layers/shape_trace.h"

namespace cnn {

namespace {
void check_nhwc(const Shape& input, const ShapeTrace& trace) {
  CNN_CHECK(input.rank() == 4, trace.where(), ": expects an NHWC input [N, H, W, C], got ", input.str());
}
}  // namespace

WindowPool2d::WindowPool2d(std::string type, int kernel, int stride, int padding, bool ceil_mode)
    : Module(std::move(type)) {
  const int effective_stride = stride == 0 ? kernel : stride;
  CNN_CHECK(kernel > 0 && effective_stride > 0 && padding >= 0 && 2 * padding <= kernel, type_name(),
            "(kernel ", kernel, ", stride ", stride, ", padding ", padding,
            "): kernel and stride must be positive and padding at most half the kernel");
  options_.kernel_h = options_.kernel_w = kernel;
  options_.stride_h = options_.stride_w = effective_stride;
  options_.pad_h = options_.pad_w = padding;
  options_.ceil_mode = ceil_mode;
}

Shape WindowPool2d::infer_shape(const Shape& input, ShapeTrace& trace) const {
  check_nhwc(input, trace);
  const int64_t out_h = window_output_size(input[1], options_.kernel_h, options_.stride_h, options_.pad_h, 1,
                                           options_.ceil_mode);
  const int64_t out_w = window_output_size(input[2], options_.kernel_w, options_.stride_w, options_.pad_w, 1,
                                           options_.ceil_mode);
  CNN_CHECK(out_h > 0 && out_w > 0, trace.where(), ": input ", input.str(), " is smaller than the ",
            options_.kernel_h, "x", options_.kernel_w, " window; use a larger input");
  return {input[0], out_h, out_w, input[3]};
}

MaxPool2d::MaxPool2d(int kernel, int stride, int padding, bool ceil_mode)
    : WindowPool2d("MaxPool2d", kernel, stride, padding, ceil_mode) {}

Tensor MaxPool2d::compute(const Tensor& x) { return max_pool2d(x, options_); }

AvgPool2d::AvgPool2d(int kernel, int stride, int padding, bool ceil_mode, bool count_include_pad)
    : WindowPool2d("AvgPool2d", kernel, stride, padding, ceil_mode) {
  options_.count_include_pad = count_include_pad;
}

Tensor AvgPool2d::compute(const Tensor& x) { return avg_pool2d(x, options_); }

AdaptiveAvgPool2d::AdaptiveAvgPool2d(int out_h, int out_w)
    : Module("AdaptiveAvgPool2d"), out_h_(out_h), out_w_(out_w) {
  CNN_CHECK(out_h > 0 && out_w > 0, "AdaptiveAvgPool2d(", out_h, ", ", out_w, "): output size must be positive");
}

Tensor AdaptiveAvgPool2d::compute(const Tensor& x) { return adaptive_avg_pool2d(x, out_h_, out_w_); }

Shape AdaptiveAvgPool2d::infer_shape(const Shape& input, ShapeTrace& trace) const {
  check_nhwc(input, trace);
  CNN_CHECK(input[1] > 0 && input[2] > 0, trace.where(), ": empty input ", input.str());
  return {input[0], out_h_, out_w_, input[3]};
}

Flatten::Flatten() : Module("Flatten") {}

Tensor Flatten::compute(const Tensor& x) {
  // [N, H, W, C] with H*W > 1: to PyTorch's (C, H, W) feature order first, so that a following
  // Linear uses torchvision's weights unchanged.
  if (x.dim() == 4 && x.size(1) * x.size(2) > 1)
    return transpose_last2(x.reshape({x.size(0), x.size(1) * x.size(2), x.size(3)})).reshape({x.size(0), -1});
  return x.reshape({x.size(0), -1});
}

Shape Flatten::infer_shape(const Shape& input, ShapeTrace& trace) const {
  CNN_CHECK(input.rank() >= 1, trace.where(), ": cannot flatten a scalar");
  return {input[0], input[0] == 0 ? 0 : input.numel() / input[0]};
}

}  // namespace cnn
