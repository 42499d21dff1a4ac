// Unary elementwise ops. Forward y = f(x); backward gx = f'(x) * gy from the saved input, with the
// element functions of kernels/common/elementwise_math.h.
#include "engine/backend.h"
#include "engine/ops.h"
#include "engine/ops/op_checks.h"
#include "engine/tape.h"
#include "kernels/elementwise.h"

namespace cnn {

namespace {
Tensor unary_backward(UnaryOp op, const Tensor& x, const Tensor& gy, double p0) {
  Tensor gx = Tensor::empty(x.shape(), x.dtype(), x.device());
  CNN_KERNEL(x.device(), unary_backward, op, x.dtype(), x.data(), gy.data(), gx.data(), x.numel(), p0);
  return gx;
}

Tensor unary(const char* name, UnaryOp op, const Tensor& x, double p0 = 0.0, double p1 = 0.0) {
  op_checks::floating(name, x);
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
  CNN_KERNEL(x.device(), unary_forward, op, x.dtype(), x.data(), y.data(), x.numel(), p0, p1);
  record_op(name, {x}, {y}, [op, x, p0](const std::vector<Tensor>& g) -> std::vector<Tensor> {
    return {unary_backward(op, x, g[0], p0)};
  });
  return y;
}
}  // namespace

// relu, silu, sigmoid, ...: one function per entry of CNN_UNARY_OPS (kernels/common/elementwise_math.h).
#define CNN_DEFINE_UNARY_OP(op, domain) \
  Tensor op(const Tensor& x) { return unary(#op, UnaryOp::op, x); }
CNN_UNARY_OPS(CNN_DEFINE_UNARY_OP)
#undef CNN_DEFINE_UNARY_OP

Tensor gelu(const Tensor& x, GeluApproximation approximation) {
  return approximation == GeluApproximation::tanh ? unary("gelu_tanh", UnaryOp::gelu_tanh, x)
                                                  : unary("gelu", UnaryOp::gelu_erf, x);
}
Tensor pow(const Tensor& x, double exponent) { return unary("pow", UnaryOp::pow, x, exponent); }
Tensor affine(const Tensor& x, double scale, double shift) { return unary("affine", UnaryOp::affine, x, scale, shift); }
Tensor scale(const Tensor& x, double factor) { return affine(x, factor, 0.0); }
Tensor shift(const Tensor& x, double offset) { return affine(x, 1.0, offset); }

Tensor operator-(const Tensor& x) { return neg(x); }
Tensor operator*(const Tensor& x, double s) { return scale(x, s); }
Tensor operator*(double s, const Tensor& x) { return scale(x, s); }
Tensor operator+(const Tensor& x, double s) { return shift(x, s); }

}  // namespace cnn
