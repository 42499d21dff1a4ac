// Pooling over NHWC: max (with the argmax kept for the backward), average (PyTorch's padding and
// count_include_pad rules, ceil_mode), adaptive average (PyTorch's bins) and global average.
#include <cmath>

#include "engine/backend.h"
#include "engine/ops.h"
#include "engine/ops/op_checks.h"
#include "engine/ops/pool_geometry.h"
#include "engine/tape.h"
#include "kernels/common/window.h"
#include "kernels/pool.h"

namespace cnn {

namespace op_geometry {
using kernels::PoolGeometry;

PoolGeometry pool_input(const char* op, const Tensor& x) {
  op_checks::floating(op, x);
  op_checks::rank(op, x, 4, "the input [N,H,W,C]");
  PoolGeometry g;
  g.n = x.size(0);
  g.h = x.size(1);
  g.w = x.size(2);
  g.c = x.size(3);
  return g;
}

PoolGeometry pool_windows(const char* op, const Tensor& x, const Pool2dOptions& o) {
  return pool_windows_over(op, pool_input(op, x), describe(x), o);
}

PoolGeometry pool_windows_over(const char* op, PoolGeometry g, const std::string& input, const Pool2dOptions& o) {
  CNN_CHECK(o.kernel_h > 0 && o.kernel_w > 0 && o.stride_h > 0 && o.stride_w > 0, op,
            ": kernel and stride must be positive");
  CNN_CHECK(o.pad_h >= 0 && o.pad_w >= 0 && 2 * o.pad_h <= o.kernel_h && 2 * o.pad_w <= o.kernel_w, op,
            ": padding must be at most half the kernel (got pad ", o.pad_h, "x", o.pad_w, " for kernel ", o.kernel_h,
            "x", o.kernel_w, ")");
  g.kh = o.kernel_h;
  g.kw = o.kernel_w;
  g.stride_h = o.stride_h;
  g.stride_w = o.stride_w;
  g.pad_h = o.pad_h;
  g.pad_w = o.pad_w;
  g.count_include_pad = o.count_include_pad;
  g.oh = window_output_size(g.h, o.kernel_h, o.stride_h, o.pad_h, 1, o.ceil_mode);
  g.ow = window_output_size(g.w, o.kernel_w, o.stride_w, o.pad_w, 1, o.ceil_mode);
  CNN_CHECK(g.oh > 0 && g.ow > 0, op, ": input ", input, " is smaller than the ", o.kernel_h, "x", o.kernel_w,
            " window");
  return g;
}
}  // namespace op_geometry

namespace {
using kernels::PoolGeometry;
using op_geometry::pool_input;
using op_geometry::pool_windows;

Tensor avg_pool_impl(const char* op, const Tensor& x, const PoolGeometry& g) {
  Tensor y = Tensor::empty({g.n, g.oh, g.ow, g.c}, x.dtype(), x.device());
  CNN_KERNEL(x.device(), avg_pool2d_forward, x.dtype(), g, x.data(), y.data());
  const Shape in_shape = x.shape();
  record_op(op, {x}, {y}, [g, in_shape](const std::vector<Tensor>& grads) -> std::vector<Tensor> {
    const Tensor& dy = grads[0];
    Tensor dx = Tensor::empty(in_shape, dy.dtype(), dy.device());
    CNN_KERNEL(dy.device(), avg_pool2d_backward, dy.dtype(), g, dy.data(), dx.data());
    return {dx};
  });
  return y;
}
}  // namespace

Tensor max_pool2d(const Tensor& x, const Pool2dOptions& options) {
  const PoolGeometry g = pool_windows("max_pool2d", x, options);
  Tensor y = Tensor::empty({g.n, g.oh, g.ow, g.c}, x.dtype(), x.device());
  Tensor argmax = Tensor::empty({g.n, g.oh, g.ow, g.c}, DType::i32, x.device());
  CNN_KERNEL(x.device(), max_pool2d_forward, x.dtype(), g, x.data(), y.data(), argmax.data_as<int32_t>());
  const Shape in_shape = x.shape();
  record_op("max_pool2d", {x}, {y}, [g, in_shape, argmax](const std::vector<Tensor>& grads) -> std::vector<Tensor> {
    const Tensor& dy = grads[0];
    Tensor dx = Tensor::empty(in_shape, dy.dtype(), dy.device());
    const int32_t* idx = argmax.data_as<int32_t>();
    CNN_KERNEL(dy.device(), max_pool2d_backward, dy.dtype(), g, dy.data(), idx, dx.data());
    return {dx};
  });
  return y;
}

Tensor avg_pool2d(const Tensor& x, const Pool2dOptions& options) {
  return avg_pool_impl("avg_pool2d", x, pool_windows("avg_pool2d", x, options));
}

Tensor adaptive_avg_pool2d(const Tensor& x, int out_h, int out_w) {
  PoolGeometry g = pool_input("adaptive_avg_pool2d", x);
  CNN_CHECK(out_h > 0 && out_w > 0, "adaptive_avg_pool2d: output size must be positive, got ", out_h, "x", out_w);
  // Bins of one pixel each: the identity (compact_cnn's 7x7 pool of a 7x7 map, ResNet's at 224).
  if (out_h == g.h && out_w == g.w) return x;
  g.adaptive = true;
  g.oh = out_h;
  g.ow = out_w;
  return avg_pool_impl("adaptive_avg_pool2d", x, g);
}

Tensor global_avg_pool2d(const Tensor& x) {
  pool_input("global_avg_pool2d", x);
  return mean(x, {1, 2});
}

}  // namespace cnn
