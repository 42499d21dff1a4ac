// The functional API: every differentiable op of the engine. Each is implemented in
// engine/ops/<op>.cpp (validation, dispatch to kernels/cpu or kernels/cuda, backward rule).
// Inputs of one op must share device and dtype; violations raise a cnn::Error naming the op and
// the shapes. Layout conventions: activations NHWC, linear weights [out, in].
#pragma once
#include <utility>
#include <vector>

#include "engine/tensor.h"
#include "kernels/batch_norm.h"

namespace cnn {

namespace distributed {
class Communicator;
}

// ---- unary elementwise (engine/ops/unary.cpp) ----
// The parameterless ones are defined from the list CNN_UNARY_OPS (kernels/common/elementwise_math.h),
// which also gives each its tests.
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
// In place counter += 1 for an i64 scalar, on its device (no host work: a CUDA graph can replay it).
void increment_(const Tensor& counter);
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
// Maximum over the last axis: values (differentiable) and i64 indices (first on ties). PyTorch's NaN
// rule: a NaN in the row makes the maximum NaN, at the first NaN's index (kernels/common/max_math.h).
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

// ---- convolution and normalisation (engine/ops/conv.cpp, engine/ops/batch_norm.cpp) ----
// Semantics follow PyTorch's for the same hyper-parameters; only the layout differs (NHWC).
struct Conv2dOptions {
  int stride_h = 1, stride_w = 1;
  int pad_h = 0, pad_w = 0;
  int dilation_h = 1, dilation_w = 1;
  int groups = 1;
};
// x [N,H,W,C], weight [O,KH,KW,C/groups], bias [O] (or undefined) -> [N,OH,OW,O] with
// OH = floor((H + 2 pad_h - dilation_h (KH - 1) - 1) / stride_h) + 1 (likewise OW).
Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(), const Conv2dOptions& options = {});

// BatchNormActivation (kernels/batch_norm.h): the activation fused after batch norm, none, relu,
// or (residual add then relu) as in ResNet blocks.
// Batch norm over N, H, W of x [N,H,W,C] with per-channel weight and bias [C] (either may be
// undefined). Training: normalises with the batch statistics (biased variance) and updates
// running_mean/running_var in place with PyTorch's convention
//   running = (1 - momentum) * running + momentum * batch_stat   (unbiased variance for running_var).
// Eval: normalises with the running statistics. Statistics are f32 for any input dtype.
// `residual` (same shape as x) is needed with add_relu.
// SyncBN: with a communicator `sync` of more than one rank, training mode normalises with the
// statistics of the batches of all ranks together (engine/distributed/sync_batch_norm.h) and the
// backward reduces its per-channel sums across ranks; weight and bias gradients stay local (data
// parallelism averages them with the other gradients). Every rank must call it in the same order.
Tensor batch_norm2d(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& running_mean,
                    const Tensor& running_var, bool training, double momentum = 0.1, double eps = 1e-5,
                    BatchNormActivation activation = BatchNormActivation::none, const Tensor& residual = Tensor(),
                    distributed::Communicator* sync = nullptr);

// ---- pooling (engine/ops/pool.cpp) ----
struct Pool2dOptions {
  int kernel_h = 2, kernel_w = 2;
  int stride_h = 2, stride_w = 2;  // PyTorch's default stride is the kernel size
  int pad_h = 0, pad_w = 0;
  bool ceil_mode = false;
  bool count_include_pad = true;  // avg_pool2d only
};

// max_pool2d(batch_norm2d(x, ..., relu), pool) as one op (engine/ops/batch_norm.cpp): the same
// values, gradients and running statistics, bit for bit. On the CPU in f32/f64 with windows that
// cannot overlap (stride >= kernel), the kernels of kernels/batch_norm_pool.h never store the
// full-size BatchNorm output (forward) nor its full-size gradient (backward); otherwise the two ops
// run one after the other.
Tensor batch_norm_relu_max_pool2d(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& running_mean,
                                  const Tensor& running_var, bool training, double momentum, double eps,
                                  const Pool2dOptions& pool, distributed::Communicator* sync = nullptr);

// Inference of a first stage: max_pool2d(batch_norm2d(conv2d(x, conv_weight, conv_bias, conv), eval, relu),
// pool), the BatchNorm with its running statistics (engine/ops/batch_norm.cpp). On the CPU in f32/f64,
// for groups 1, at most 4 input channels (an image) and windows that cannot overlap, when no gradient
// is being recorded, the kernel of kernels/conv_batch_norm_pool.h never stores the convolution's
// output; its values then equal the separate ops' up to the rounding of the convolution's sum.
// Otherwise it is those ops, with their gradients.
Tensor conv2d_batch_norm_relu_max_pool2d(const Tensor& x, const Tensor& conv_weight, const Tensor& conv_bias,
                                         const Conv2dOptions& conv, const Tensor& weight, const Tensor& bias,
                                         const Tensor& running_mean, const Tensor& running_var, double eps,
                                         const Pool2dOptions& pool);
// Whether conv2d_batch_norm_relu_max_pool2d runs its one kernel for these inputs (rather than the
// separate ops).
bool conv2d_batch_norm_relu_max_pool2d_fuses(const Tensor& x, const Tensor& conv_weight, const Tensor& conv_bias,
                                             const Conv2dOptions& conv, const Tensor& weight, const Tensor& bias,
                                             const Pool2dOptions& pool);
// Inference of a convolution and its BatchNorm: batch_norm2d(conv2d(x, conv_weight, conv_bias, conv),
// eval, activation, residual), the BatchNorm with its running statistics (engine/ops/batch_norm.cpp).
// On the CPU with oneDNN, in f32/bf16, for groups 1, when no gradient is being recorded, one oneDNN
// convolution with the BatchNorm folded in (its scale into the weights, its shift into the bias, the
// residual and the ReLU into the epilogue), so that the convolution's output is written once and
// never read back; its values equal the separate ops' up to rounding (the scaled weights, the
// order of the epilogue's terms). Otherwise it is those ops, with their gradients.
Tensor conv2d_batch_norm2d(const Tensor& x, const Tensor& conv_weight, const Tensor& conv_bias,
                           const Conv2dOptions& conv, const Tensor& weight, const Tensor& bias,
                           const Tensor& running_mean, const Tensor& running_var, double eps,
                           BatchNormActivation activation, const Tensor& residual = Tensor());
// Whether conv2d_batch_norm2d runs its one convolution for these inputs (rather than the separate ops).
bool conv2d_batch_norm2d_folds(const Tensor& x, const Tensor& conv_weight, const Tensor& conv_bias,
                               const Conv2dOptions& conv, const Tensor& weight, const Tensor& bias,
                               BatchNormActivation activation, const Tensor& residual = Tensor());
// Ties: the first (row-major) wins; a NaN in a window wins (the first NaN), as in PyTorch.
Tensor max_pool2d(const Tensor& x, const Pool2dOptions& options);
Tensor avg_pool2d(const Tensor& x, const Pool2dOptions& options);
// PyTorch's adaptive pooling bins: start = floor(i * H / OH), end = ceil((i + 1) * H / OH).
Tensor adaptive_avg_pool2d(const Tensor& x, int out_h, int out_w);
Tensor global_avg_pool2d(const Tensor& x);  // [N,H,W,C] -> [N,C]

// ---- regularisation (engine/ops/dropout.cpp) ----
// Masks come from the Philox generator keyed by (seed, offset, element): the same mask on CPU and
// CUDA, and in a replayed (checkpointed) forward pass. Identity when p == 0. With `seed_from` (one
// i64 on x's device) the seed is derive_seed(seed_from, seed), worked out by the kernel: a step
// captured as a CUDA graph draws new masks at each replay from the step seed written there.
Tensor dropout(const Tensor& x, double p, uint64_t seed, uint64_t offset, const Tensor& seed_from = Tensor());
// Stochastic depth: each sample (first axis) is zeroed with probability p, survivors scaled by 1/(1-p).
Tensor drop_path(const Tensor& x, double p, uint64_t seed, uint64_t offset, const Tensor& seed_from = Tensor());

// ---- shape ops (engine/ops/concat.cpp, engine/ops/transpose.cpp) ----
Tensor concat_channels(const std::vector<Tensor>& xs);  // along the last axis; other dims must match
// [B, M, N] -> [B, N, M] (any dtype; differentiable for floating ones).
Tensor transpose_last2(const Tensor& x);

// ---- dtype (engine/ops/cast.cpp) ----
Tensor cast(const Tensor& x, DType dtype);  // differentiable between floating types

}  // namespace cnn
