// conv2d in NHWC: validation, output size as PyTorch computes it, dispatch to the CPU kernels
// (oneDNN for f32 and bf16 where the build has it and cpu_convolutions() says so; else im2col + GEMM, direct
// depthwise) or cuDNN, bias added as a broadcast over the channel axis.
// Backward: dx by backward-data, dW by backward-filter, db by summing dy over N, OH, OW.
#include "engine/backend.h"
#include "engine/cpu_convolutions.h"
#include "engine/graph.h"
#include "engine/cudnn_conv.h"
#include "engine/ops.h"
#include "engine/ops/conv_geometry.h"
#include "engine/ops/op_checks.h"
#include "engine/profiler.h"
#include "engine/tape.h"
#include "kernels/common/window.h"
#include "kernels/conv.h"
#include "kernels/elementwise.h"
#include "kernels/reduce.h"

namespace cnn {

namespace {
using kernels::ConvGeometry;

ConvGeometry geometry(const Tensor& x, const Tensor& w, const Conv2dOptions& o) {
  ConvGeometry g;
  g.n = x.size(0);
  g.h = x.size(1);
  g.w = x.size(2);
  g.c = x.size(3);
  g.o = w.size(0);
  g.kh = w.size(1);
  g.kw = w.size(2);
  g.stride_h = o.stride_h;
  g.stride_w = o.stride_w;
  g.pad_h = o.pad_h;
  g.pad_w = o.pad_w;
  g.dilation_h = o.dilation_h;
  g.dilation_w = o.dilation_w;
  g.groups = o.groups;
  g.oh = window_output_size(g.h, g.kh, o.stride_h, o.pad_h, o.dilation_h, false);
  g.ow = window_output_size(g.w, g.kw, o.stride_w, o.pad_w, o.dilation_w, false);
  return g;
}

void check_conv(const Tensor& x, const Tensor& w, const Tensor& b, const Conv2dOptions& o) {
  op_checks::floating("conv2d", x);
  op_checks::same_device_dtype("conv2d", x, w);
  op_checks::rank("conv2d", x, 4, "the input [N,H,W,C]");
  op_checks::rank("conv2d", w, 4, "the weight [O,KH,KW,C/groups]");
  CNN_CHECK(o.stride_h > 0 && o.stride_w > 0 && o.dilation_h > 0 && o.dilation_w > 0 && o.pad_h >= 0 && o.pad_w >= 0 &&
                o.groups > 0,
            "conv2d: stride and dilation must be positive and padding non-negative");
  CNN_CHECK(x.size(3) % o.groups == 0 && w.size(0) % o.groups == 0, "conv2d: ", o.groups,
            " groups must divide the input channels of ", describe(x), " and the output channels of ", describe(w));
  CNN_CHECK(w.size(3) == x.size(3) / o.groups, "conv2d: weight ", describe(w), " expects ", w.size(3) * o.groups,
            " input channels (", o.groups, " groups) but the input ", describe(x), " has ", x.size(3),
            " (weights are [O,KH,KW,C/groups]; OIHW weights need transposing)");
  if (b.defined()) {
    op_checks::same_device_dtype("conv2d", x, b);
    CNN_CHECK(b.dim() == 1 && b.size(0) == w.size(0), "conv2d: bias ", describe(b), " must be [", w.size(0), "]");
  }
}

using cudnn_conv::ConvDirection;

// One pass on the tensors' device, profiled as CNN_KERNEL's calls are.
void run_pass(const char* name, ConvDirection direction, const ConvGeometry& g, const Tensor& first,
              const Tensor& second, Tensor& out) {
  const profiler::Scope span(name, profiler::Category::op, first.device());
  if (first.device().is_cpu())
    graph_capture::run_on_cpu([direction, dt = first.dtype(), g, a = first.data(), b = second.data(), y = out.data()] {
      run_cpu_convolution(direction, dt, g, a, b, y);
    });
  else cudnn_conv::run(direction, first.dtype(), g, first.device(), first.data(), second.data(), out.data());
}

Tensor conv_forward(const ConvGeometry& g, const Tensor& x, const Tensor& w) {
  Tensor y = Tensor::empty({g.n, g.oh, g.ow, g.o}, x.dtype(), x.device());
  run_pass("conv2d_forward", ConvDirection::forward, g, x, w, y);
  return y;
}

Tensor conv_backward_data(const ConvGeometry& g, const Tensor& dy, const Tensor& w) {
  Tensor dx = Tensor::empty({g.n, g.h, g.w, g.c}, dy.dtype(), dy.device());
  run_pass("conv2d_backward_data", ConvDirection::backward_data, g, dy, w, dx);
  return dx;
}

// dx += backward-data(dy, w) in place, where the CPU's oneDNN path takes it (see
// gradient_to_accumulate in engine/tape.h); false, with dx untouched, elsewhere.
bool conv_backward_data_into(const ConvGeometry& g, const Tensor& dy, const Tensor& w, const Tensor& dx) {
  if (!dy.device().is_cpu() || dx.dtype() != dy.dtype() || dx.device() != dy.device() ||
      dx.shape() != Shape{g.n, g.h, g.w, g.c} || !cpu_convolution_accumulates(dy.dtype(), g))
    return false;
  const profiler::Scope span("conv2d_backward_data", profiler::Category::op, dy.device());
  graph_capture::run_on_cpu([dt = dy.dtype(), g, a = dy.data(), b = w.data(), y = dx.data()] {
    CNN_CHECK(run_cpu_convolution_accumulating(dt, g, a, b, y),
              "conv2d backward-data: oneDNN declined adding into the gradient after it had taken it");
  });
  return true;
}

Tensor conv_backward_filter(const ConvGeometry& g, const Tensor& x, const Tensor& dy) {
  Tensor dw = Tensor::empty({g.o, g.kh, g.kw, g.group_in()}, dy.dtype(), dy.device());
  run_pass("conv2d_backward_filter", ConvDirection::backward_filter, g, x, dy, dw);
  return dw;
}
}  // namespace

namespace op_geometry {
ConvGeometry conv_windows(const Tensor& x, const Tensor& weight, const Tensor& bias, const Conv2dOptions& options) {
  check_conv(x, weight, bias, options);
  const ConvGeometry g = geometry(x, weight, options);
  CNN_CHECK(g.oh > 0 && g.ow > 0, "conv2d: input ", describe(x), " is smaller than the dilated kernel ", describe(weight),
            " with padding ", options.pad_h, "x", options.pad_w, ": the output would be empty");
  return g;
}
}  // namespace op_geometry

Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias, const Conv2dOptions& options) {
  const ConvGeometry g = op_geometry::conv_windows(x, weight, bias, options);
  Tensor y = conv_forward(g, x, weight);
  const int64_t rows = g.n * g.oh * g.ow;
  if (bias.defined()) {
    const BroadcastIndex same, per_channel{rows, g.o};
    CNN_KERNEL(x.device(), binary_forward, BinaryOp::add, x.dtype(), y.data(), same, bias.data(), per_channel, y.data(),
               y.numel());
  }
  const bool want_x = x.requires_grad(), want_w = weight.requires_grad(), want_b = bias.defined() && bias.requires_grad();
  record_op("conv2d", {x, weight, bias}, {y},
            [g, x, weight, rows, want_x, want_w, want_b](const std::vector<Tensor>& grads) -> std::vector<Tensor> {
              const Tensor& dy = grads[0];
              std::vector<Tensor> out(3);
              if (want_x) {
                // The gradient x already has from its other consumer, when the tape lets us add
                // into it (a residual block's input): no separate add afterwards.
                const Tensor into = gradient_to_accumulate(0);
                out[0] = into.defined() && conv_backward_data_into(g, dy, weight, into) ? into
                                                                                       : conv_backward_data(g, dy, weight);
              }
              if (want_w) out[1] = conv_backward_filter(g, x, dy);
              if (want_b) out[2] = sum(dy.reshape({rows, g.o}), {0});
              return out;
            });
  return y;
}

}  // namespace cnn
