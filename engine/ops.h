// The functional API: every differentiable op of the engine. Each is implemented in
// engine/ops/<op>.cpp (validation, dispatch to kernels/cpu or kernels/cuda, backward rule).
// Inputs of one op must share device and dtype; violations raise a cnn::Error naming the op and
// the shapes. Layout conventions: activations NHWC, linear weights [out, in].
#pragma once
#include <utility>
#include <vector>

#include "engine/tensor.h"

namespace cnn {

// ---- unary elementwise (engine/ops/unary.cpp) ----
Tensor relu(const Tensor& x);
Tensor silu(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor tanh(const Tensor& x);
enum class GeluApproximation { none, tanh };  // none: exact erf form
Tensor gelu(const Tensor& x, GeluApproximation approximation = GeluApproximation::none);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor neg(const Tensor& x);
Tensor abs(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor pow(const Tensor& x, double exponent);
Tensor affine(const Tensor& x, double scale, double shift);  // scale * x + shift
Tensor scale(const Tensor& x, double factor);                 // factor * x
Tensor shift(const Tensor& x, double offset);                 // x + offset

// ---- binary elementwise with broadcasting (engine/ops/binary.cpp) ----
// Shapes broadcast as in NumPy where each operand differs from the output in one run of adjacent
// axes: same shape, a one-element tensor, [C] against [..., C], [N,1,1,C] against [N,H,W,C].
// Gradients are reduced back to each input's shape.
Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
// In place a += b (same shape), not recorded: for gradient accumulation and optimizer updates.
void add_(Tensor& a, const Tensor& b);
Shape broadcast_shape(const Shape& a, const Shape& b);  // the output shape, or a cnn::Error

Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& x);
Tensor operator*(const Tensor& x, double s);
Tensor operator*(double s, const Tensor& x);
Tensor operator+(const Tensor& x, double s);

// ---- reductions (engine/ops/reduce.cpp) ----
Tensor sum(const Tensor& x);   // over all elements: a [] (rank-0) tensor
Tensor mean(const Tensor& x);
Tensor sum(const Tensor& x, const std::vector<int>& axes, bool keepdim = false);
Tensor mean(const Tensor& x, const std::vector<int>& axes, bool keepdim = false);
// Maximum over the last axis: values (differentiable) and i64 indices (first on ties).
std::pair<Tensor, Tensor> max_last(const Tensor& x);

// ---- matrix products (engine/ops/matmul.cpp) ----
Tensor matmul(const Tensor& a, const Tensor& b);  // [M,K] x [K,N] -> [M,N]
// y = x W^T + b for x [..., in], W [out, in], b [out] (b may be undefined).
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());

// ---- softmax family (engine/ops/softmax.cpp, engine/ops/cross_entropy.cpp) ----
Tensor softmax(const Tensor& x);      // over the last axis
Tensor log_softmax(const Tensor& x);  // over the last axis
// Mean cross-entropy of logits [N, K] against i64 labels [N], with label smoothing in [0, 1).
// The loss is f32 (f64 for f64 logits) whatever the logits' dtype.
Tensor cross_entropy(const Tensor& logits, const Tensor& labels, double label_smoothing = 0.0);
// Mean cross-entropy against soft target distributions [N, K] (MixUp, CutMix).
Tensor cross_entropy_soft(const Tensor& logits, const Tensor& target_probs);

// ---- dtype (engine/ops/cast.cpp) ----
Tensor cast(const Tensor& x, DType dtype);  // differentiable between floating types

}  // namespace cnn
