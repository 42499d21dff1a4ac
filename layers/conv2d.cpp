// Conv2d (see conv2d.h): parameter registration, the forward call into engine conv2d, and the shape pass.
#include "layers/conv2d.h"

#include "layers/shape_trace.h"

namespace cnn {

Conv2d::Conv2d(const Conv2dSpec& spec) : Module("Conv2d"), spec_(spec) {
  CNN_CHECK(spec.in_channels > 0 && spec.out_channels > 0 && spec.kernel > 0 && spec.stride > 0 && spec.groups > 0 &&
                spec.padding >= 0 && spec.dilation > 0,
            "Conv2d(in ", spec.in_channels, ", out ", spec.out_channels, ", kernel ", spec.kernel, ", stride ",
            spec.stride, ", padding ", spec.padding, ", groups ", spec.groups,
            "): channels, kernel, stride, groups and dilation must be positive, padding not negative");
  CNN_CHECK(spec.in_channels % spec.groups == 0 && spec.out_channels % spec.groups == 0, "Conv2d: ",
            spec.in_channels, " input and ", spec.out_channels, " output channels are not both divisible by ",
            spec.groups, " groups");
  options_.stride_h = options_.stride_w = spec.stride;
  options_.pad_h = options_.pad_w = spec.padding;
  options_.dilation_h = options_.dilation_w = spec.dilation;
  options_.groups = spec.groups;
  weight_ = add_parameter("weight", {spec.out_channels, spec.kernel, spec.kernel, spec.in_channels / spec.groups},
                          ParamRole::conv_weight,
                          ParamInit::kaiming_normal_fan_out(spec.out_channels, spec.kernel, spec.kernel));
  if (spec.bias) bias_ = add_parameter("bias", {spec.out_channels}, ParamRole::bias, ParamInit::constant(0.0));
}

Conv2d::Conv2d(int in_channels, int out_channels, int kernel, int stride, int groups, bool bias)
    : Conv2d(Conv2dSpec{in_channels, out_channels, kernel, stride, (kernel - 1) / 2, groups, bias}) {}

Tensor Conv2d::compute(const Tensor& x) {
  return conv2d(x, weight_for(x), bias_for(x), options_);
}

Shape Conv2d::infer_shape(const Shape& input, ShapeTrace& trace) const {
  CNN_CHECK(input.rank() == 4 && input[3] == spec_.in_channels, trace.where(), ": expects NHWC input with ",
            spec_.in_channels, " channels, got ", input.str());
  const int64_t out_h = window_output_size(input[1], spec_.kernel, spec_.stride, spec_.padding, spec_.dilation, false);
  const int64_t out_w = window_output_size(input[2], spec_.kernel, spec_.stride, spec_.padding, spec_.dilation, false);
  CNN_CHECK(out_h > 0 && out_w > 0, trace.where(), ": input ", input.str(), " is smaller than the ", spec_.kernel,
            "x", spec_.kernel, " kernel (padding ", spec_.padding, "); use a larger input");
  const Shape output{input[0], out_h, out_w, spec_.out_channels};
  const int64_t per_output = static_cast<int64_t>(spec_.kernel) * spec_.kernel * (spec_.in_channels / spec_.groups);
  trace.add_macs(output.numel() * per_output);
  return output;
}

}  // namespace cnn
