// The element functions of the unary and binary ops and their derivatives, written once for the
// CPU reference loops and the CUDA kernels. C is the compute type (float, or double for f64).
#pragma once
#include <cmath>
#include <cstdint>

#include "kernels/common/host_device.h"

namespace cnn {

// Where a unary op's input may lie; the tests draw their inputs from there.
enum class UnaryDomain : uint8_t {
  real,          // smooth on the whole line
  positive,      // defined (or smooth) for x > 0 only
  kink_at_zero,  // defined everywhere, not differentiable at 0
};

// The unary ops, one line each: X(op, domain). Adding a parameterless op: a line here, its two
// cases in unary_forward_value and unary_backward_value below (the switches have no default, so a
// missing case does not compile), its declaration in engine/ops.h and its row in docs/engine.md.
// Its public function, its gradient check, its CPU-vs-CUDA agreement test and its emulated-kernel
// test all come from this list.
//
// The parameterless ops: each is the public function cnn::op(x), defined in engine/ops/unary.cpp.
#define CNN_UNARY_OPS(X) \
  X(relu, kink_at_zero)  \
  X(silu, real)          \
  X(sigmoid, real)       \
  X(tanh, real)          \
  X(exp, real)           \
  X(log, positive)       \
  X(neg, real)           \
  X(abs, kink_at_zero)   \
  X(sqrt, positive)
// The ops reached through a public function with arguments (engine/ops.h).
#define CNN_UNARY_OPS_WITH_ARGUMENTS(X) \
  X(gelu_erf, real)  /* gelu(x), gelu(x, GeluApproximation::none) */ \
  X(gelu_tanh, real) /* gelu(x, GeluApproximation::tanh) */          \
  X(pow, positive)   /* pow(x, p0): x^p0 */                          \
  X(affine, real)    /* affine(x, p0, p1) = p0 * x + p1; scale, shift */

#define CNN_UNARY_ENUMERATOR(op, domain) op,
enum class UnaryOp : uint8_t { CNN_UNARY_OPS(CNN_UNARY_ENUMERATOR) CNN_UNARY_OPS_WITH_ARGUMENTS(CNN_UNARY_ENUMERATOR) };
#undef CNN_UNARY_ENUMERATOR

enum class BinaryOp : uint8_t { add, sub, mul, div };

template <class C>
CNN_HD C sigmoid_of(C x) {
  return C(1) / (C(1) + std::exp(-x));
}

template <class C>
CNN_HD C unary_forward_value(UnaryOp op, C x, C p0, C p1) {
  constexpr C kSqrt2OverPi = C(0.7978845608028654);
  constexpr C kInvSqrt2 = C(0.7071067811865476);
  switch (op) {
    case UnaryOp::relu: return x > C(0) ? x : C(0);
    case UnaryOp::silu: return x * sigmoid_of(x);
    case UnaryOp::sigmoid: return sigmoid_of(x);
    case UnaryOp::tanh: return std::tanh(x);
    case UnaryOp::gelu_tanh:
      return C(0.5) * x * (C(1) + std::tanh(kSqrt2OverPi * (x + C(0.044715) * x * x * x)));
    case UnaryOp::gelu_erf: return C(0.5) * x * (C(1) + std::erf(x * kInvSqrt2));
    case UnaryOp::exp: return std::exp(x);
    case UnaryOp::log: return std::log(x);
    case UnaryOp::neg: return -x;
    case UnaryOp::abs: return std::fabs(x);
    case UnaryOp::sqrt: return std::sqrt(x);
    case UnaryOp::pow: return std::pow(x, p0);
    case UnaryOp::affine: return p0 * x + p1;
  }
  return x;
}

// d(output)/d(x) times the incoming gradient gy, computed from the saved input x.
template <class C>
CNN_HD C unary_backward_value(UnaryOp op, C x, C gy, C p0) {
  constexpr C kSqrt2OverPi = C(0.7978845608028654);
  constexpr C kInvSqrt2 = C(0.7071067811865476);
  constexpr C kInvSqrt2Pi = C(0.3989422804014327);
  switch (op) {
    case UnaryOp::relu: return x > C(0) ? gy : C(0);
    case UnaryOp::silu: {
      const C s = sigmoid_of(x);
      return gy * s * (C(1) + x * (C(1) - s));
    }
    case UnaryOp::sigmoid: {
      const C s = sigmoid_of(x);
      return gy * s * (C(1) - s);
    }
    case UnaryOp::tanh: {
      const C t = std::tanh(x);
      return gy * (C(1) - t * t);
    }
    case UnaryOp::gelu_tanh: {
      const C inner = kSqrt2OverPi * (x + C(0.044715) * x * x * x);
      const C t = std::tanh(inner);
      const C dinner = kSqrt2OverPi * (C(1) + C(3) * C(0.044715) * x * x);
      return gy * (C(0.5) * (C(1) + t) + C(0.5) * x * (C(1) - t * t) * dinner);
    }
    case UnaryOp::gelu_erf:
      return gy * (C(0.5) * (C(1) + std::erf(x * kInvSqrt2)) + x * kInvSqrt2Pi * std::exp(C(-0.5) * x * x));
    case UnaryOp::exp: return gy * std::exp(x);
    case UnaryOp::log: return gy / x;
    case UnaryOp::neg: return -gy;
    case UnaryOp::abs: return x > C(0) ? gy : (x < C(0) ? -gy : C(0));
    case UnaryOp::sqrt: return gy * C(0.5) / std::sqrt(x);
    case UnaryOp::pow: return gy * p0 * std::pow(x, p0 - C(1));
    case UnaryOp::affine: return gy * p0;
  }
  return gy;
}

template <class C>
CNN_HD C binary_forward_value(BinaryOp op, C a, C b) {
  switch (op) {
    case BinaryOp::add: return a + b;
    case BinaryOp::sub: return a - b;
    case BinaryOp::mul: return a * b;
    case BinaryOp::div: return a / b;
  }
  return a;
}

// Gradients of op(a, b) with respect to a and to b, for an incoming gradient gy.
template <class C>
CNN_HD void binary_backward_values(BinaryOp op, C a, C b, C gy, C& ga, C& gb) {
  switch (op) {
    case BinaryOp::add: ga = gy; gb = gy; return;
    case BinaryOp::sub: ga = gy; gb = -gy; return;
    case BinaryOp::mul: ga = gy * b; gb = gy * a; return;
    case BinaryOp::div: ga = gy / b; gb = -gy * a / (b * b); return;
  }
}

// Where an operand of a binary op sits in the output. The output is viewed as [outer, mid, inner];
// a broadcast operand has shape [outer, 1, inner] (mid == 1 means it is not broadcast at all).
// This covers every pattern the models need: same shape, scalar, [C] against [..., C], and
// [N,1,1,C] against [N,H,W,C].
struct BroadcastIndex {
  int64_t mid = 1;
  int64_t inner = 1;
  CNN_HD int64_t operator()(int64_t i) const {
    if (mid == 1) return i;
    return (i / (mid * inner)) * inner + i % inner;
  }
};

}  // namespace cnn
