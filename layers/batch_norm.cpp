// BatchNorm2d (see batch_norm.h).
#include "layers/batch_norm.h"

#include "engine/profiler.h"
#include "engine/tape.h"
#include "layers/shape_trace.h"

namespace cnn {

BatchNorm2d::BatchNorm2d(int channels, double eps, double momentum)
    : Module("BatchNorm2d"), channels_(channels), eps_(eps), momentum_(momentum) {
  CNN_CHECK(channels > 0, "BatchNorm2d(", channels, "): the number of channels must be positive");
  CNN_CHECK(eps > 0 && momentum >= 0 && momentum <= 1, "BatchNorm2d(", channels, ", eps ", eps, ", momentum ",
            momentum, "): eps must be positive and momentum in [0, 1]");
  weight_ = add_parameter("weight", {channels}, ParamRole::norm_weight, ParamInit::constant(1.0));
  bias_ = add_parameter("bias", {channels}, ParamRole::norm_bias, ParamInit::constant(0.0));
  running_mean_ = add_buffer("running_mean", {channels}, DType::f32, ParamInit::constant(0.0));
  running_var_ = add_buffer("running_var", {channels}, DType::f32, ParamInit::constant(1.0));
  batches_ = add_buffer("num_batches_tracked", Shape{}, DType::i64, ParamInit::constant(0.0));
}

void BatchNorm2d::zero_init_weight() { set_parameter_init(weight_, ParamInit::constant(0.0)); }

Tensor BatchNorm2d::compute(const Tensor& x) { return normalize(x, BatchNormActivation::none, Tensor()); }

Tensor BatchNorm2d::forward_fused(const Tensor& x, BatchNormActivation activation, const Tensor& residual) {
  const profiler::ModuleScope span(name(), type_name(), device());  // blocks call this rather than forward()
  return normalize(x, activation, residual);
}

Tensor BatchNorm2d::forward_fused_max_pool(const Tensor& x, const Pool2dOptions& pool) {
  const profiler::ModuleScope span(name(), type_name(), device());
  return normalize(x, BatchNormActivation::relu, Tensor(), &pool);
}

Tensor BatchNorm2d::forward_conv_fused_max_pool(Conv2d& conv, const Tensor& x, const Pool2dOptions& pool) {
  const bool disjoint_windows = pool.stride_h >= pool.kernel_h && pool.stride_w >= pool.kernel_w;
  if (!training() && !disjoint_windows)  // (ResNet's stem): no fused BatchNorm + max-pool to keep
    return max_pool2d(forward_conv_fused(conv, x, BatchNormActivation::relu), pool);
  if (training() || x.dtype() != conv.weight().dtype() ||
      !conv2d_batch_norm_relu_max_pool2d_fuses(x, conv.weight(), conv.bias(), conv.options(), weight(), bias(), pool))
    return forward_fused_max_pool(conv(x), pool);  // each module in its own span
  const profiler::ModuleScope span(name(), type_name(), device());  // the convolution's time included
  const auto [w, b] = affine_in(keep_statistics_in(x.dtype()));
  return conv2d_batch_norm_relu_max_pool2d(x, conv.weight(), conv.bias(), conv.options(), w, b, running_mean(),
                                           running_var(), eps_, pool);
}

Tensor BatchNorm2d::forward_conv_fused(Conv2d& conv, const Tensor& x, BatchNormActivation activation,
                                       const Tensor& residual) {
  // (The input in the convolution's compute dtype, as its forward would cast it.)
  if (training() || x.dtype() != conv.compute_dtype()) return forward_fused(conv(x), activation, residual);
  const Tensor w = conv.weight_for(x), b = conv.bias_for(x);
  const auto [scale, shift] = affine_in(keep_statistics_in(x.dtype()));
  if (!conv2d_batch_norm2d_folds(x, w, b, conv.options(), scale, shift, activation, residual))
    return forward_fused(conv(x), activation, residual);  // each module in its own span
  const profiler::ModuleScope span(name(), type_name(), device());  // the convolution's time included
  return conv2d_batch_norm2d(x, w, b, conv.options(), scale, shift, running_mean(), running_var(), eps_, activation,
                             residual);
}

std::pair<Tensor, Tensor> BatchNorm2d::affine_in(DType statistics) const {
  const auto as = [&](const Tensor& p) { return p.dtype() == statistics ? p : cast(p, statistics); };
  return {as(weight()), as(bias())};
}

DType BatchNorm2d::keep_statistics_in(DType input) {
  // Statistics and affine terms are kept in the accumulation dtype of the input: f32 for f32, f16 and
  // bf16 activations, f64 for f64 (gradient checks). The running statistics follow it for good.
  const DType statistics = accumulate_dtype(input);
  if (running_mean().dtype() != statistics) {
    NoGrad no_grad;
    set_buffer(running_mean_, running_mean().to(statistics));
    set_buffer(running_var_, running_var().to(statistics));
  }
  return statistics;
}

Tensor BatchNorm2d::normalize(const Tensor& x, BatchNormActivation activation, const Tensor& residual,
                              const Pool2dOptions* pool) {
  const DType statistics = keep_statistics_in(x.dtype());
  Tensor mean = running_mean();
  Tensor var = running_var();
  double momentum = momentum_;
  if (training() && replaying()) {
    // A checkpointed block replays its forward pass during backward: the running statistics were
    // already updated by the first pass, so the replay updates copies.
    mean = mean.clone();
    var = var.clone();
  } else if (training()) {
    if (cumulative_) momentum = 1.0 / static_cast<double>(count_batch());
    else {
      increment_(buffer(batches_));  // on the device: the step may be a replayed CUDA graph
      mirrored_buffer_ = nullptr;    // count_batch's host mirror reads the count again
    }
  }
  const auto [w, b] = affine_in(statistics);
  if (pool != nullptr)
    return batch_norm_relu_max_pool2d(x, w, b, mean, var, training(), momentum, eps_, *pool, sync_.get());
  return batch_norm2d(x, w, b, mean, var, training(), momentum, eps_, activation, residual, sync_.get());
}

int sync_batch_norm(Module& model, const std::shared_ptr<distributed::Communicator>& comm) {
  int count = 0;
  for (auto& [name, module] : model.named_modules())
    if (auto* bn = dynamic_cast<BatchNorm2d*>(module)) {
      bn->set_sync(comm);
      ++count;
    }
  return count;
}

void BatchNorm2d::reset_running_stats() {
  NoGrad no_grad;
  Tensor(running_mean()).fill_(0.0);
  Tensor(running_var()).fill_(1.0);
  Tensor(buffer(batches_)).fill_(0.0);
  mirrored_buffer_ = nullptr;  // the host mirror reads the count again
}

// The cumulative average needs n on the host for its momentum 1/n (update_bn, eager by nature).
int64_t BatchNorm2d::count_batch() {
  Tensor count = buffer(batches_);
  if (count.device().is_cpu()) return ++count.data_as<int64_t>()[0];
  // On a device the count is mirrored on the host (read once per buffer) so that counting never waits.
  if (mirrored_buffer_ != count.data()) {
    batches_on_host_ = static_cast<int64_t>(count.item());
    mirrored_buffer_ = count.data();
  }
  count.fill_(static_cast<double>(++batches_on_host_));
  return batches_on_host_;
}

int64_t BatchNorm2d::num_batches_tracked() const { return static_cast<int64_t>(buffer(batches_).item()); }

Shape BatchNorm2d::infer_shape(const Shape& input, ShapeTrace& trace) const {
  CNN_CHECK(input.rank() == 4 && input[3] == channels_, trace.where(), ": expects NHWC input with ", channels_,
            " channels, got ", input.str());
  return input;
}

}  // namespace cnn
