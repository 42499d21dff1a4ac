// batch_norm2d over NHWC with fused activation (none, relu, residual add + relu). Training mode
// normalises with batch statistics and updates the running statistics in place (PyTorch's momentum
// convention, unbiased running variance); eval mode uses the running statistics. The backward uses
// the saved input, output (for the relu mask; on the CPU the mask of a plain relu is computed again
// from the input), mean and inverse standard deviation.
#include "engine/backend.h"
#include "engine/cpu_convolutions.h"
#include "engine/graph.h"
#include "engine/profiler.h"
#include "engine/distributed/sync_batch_norm.h"
#include "engine/ops.h"
#include "engine/ops/kernel_workspace.h"
#include "engine/ops/op_checks.h"
#include "engine/ops/conv_geometry.h"
#include "engine/ops/pool_geometry.h"
#include "engine/tape.h"
#include "kernels/batch_norm.h"
#include "kernels/batch_norm_pool.h"
#include "kernels/conv_batch_norm_pool.h"

namespace cnn {

namespace {
// batch_norm2d's checks of the per-channel tensors for an input of c channels, accumulate dtype acc,
// on `device` (`input` describes it in the messages).
void check_channel_tensors(const std::string& input, const Device& device, DType acc, int64_t c, const Tensor& weight,
                           const Tensor& bias, const Tensor& running_mean, const Tensor& running_var) {
  const auto check = [&](const char* what, const Tensor& t) {
    if (!t.defined()) return;
    CNN_CHECK(t.dim() == 1 && t.size(0) == c && t.dtype() == acc && t.device() == device, "batch_norm2d: ", what,
              " must be ", dtype_name(acc), " [", c, "] on ", device.str(), " for input ", input, ", got ",
              describe(t));
  };
  check("weight", weight);
  check("bias", bias);
  check("running_mean", running_mean);
  check("running_var", running_var);
}

// Eval mode's inverse standard deviation, of the running variance.
Tensor running_invstd(const Tensor& running_var, double eps, int64_t m) {
  NoGrad no_grad;
  Tensor invstd = Tensor::empty(running_var.shape(), running_var.dtype(), running_var.device());
  CNN_KERNEL(running_var.device(), batch_norm_update_stats, running_var.dtype(), nullptr, running_var.data(),
             running_var.numel(), m, nullptr, 0.0, eps, invstd.data(), nullptr, nullptr);
  return invstd;
}

void* data_or_null(const Tensor& t) { return t.defined() ? t.data() : nullptr; }

// Scratch for the CUDA reductions' per-block partial sums (engine/ops/kernel_workspace.h).
void* reduction_workspace([[maybe_unused]] DType dt, [[maybe_unused]] int64_t m, [[maybe_unused]] int64_t c, const Device& device,
                          Tensor& holder) {
  size_t bytes = 0;
  if (!device.is_cpu()) CNN_IF_CUDA(bytes = kernels::cuda::batch_norm_workspace_bytes(dt, m, c));
  return kernel_workspace(bytes, device, holder);
}
}  // namespace

namespace {
// What the forward of a batch norm settles before it normalises: the checks, the statistics it
// normalises with (the batch's, over every rank with SyncBN, or the running ones), and the
// running-statistics update.
struct Normalisation {
  int64_t c = 0, m = 0;
  DType acc = DType::f32;
  Tensor mean, invstd;
  Tensor global_count;                            // SyncBN: every rank's count per channel
  distributed::Communicator* across = nullptr;  // SyncBN in training mode
};

Normalisation prepare_normalisation(const Tensor& x, const Tensor& weight, const Tensor& bias,
                                    const Tensor& running_mean, const Tensor& running_var, bool training,
                                    double momentum, double eps, distributed::Communicator* sync) {
  op_checks::floating("batch_norm2d", x);
  CNN_CHECK(x.dim() >= 2, "batch_norm2d: needs [N,H,W,C] (or [N,C]) input, got ", describe(x));
  Normalisation n;
  n.c = x.size(-1);
  n.m = x.numel() / std::max<int64_t>(n.c, 1);
  n.acc = accumulate_dtype(x.dtype());
  const int64_t c = n.c, m = n.m;
  check_channel_tensors(describe(x), x.device(), n.acc, c, weight, bias, running_mean, running_var);
  CNN_CHECK(training || (running_mean.defined() && running_var.defined()),
            "batch_norm2d: eval mode needs running_mean and running_var");
  CNN_CHECK(running_mean.defined() == running_var.defined(), "batch_norm2d: pass both running_mean and running_var "
            "or neither, got ", describe(running_mean), " and ", describe(running_var));
  CNN_CHECK(!training || m > 1, "batch_norm2d: training needs more than one value per channel, got ", describe(x),
            "; use a larger batch or eval mode");

  // SyncBN (also over a world of one rank, where it computes what plain batch norm does).
  n.across = training && sync ? sync : nullptr;
  NoGrad no_grad;
  if (training) {
    n.invstd = Tensor::empty({c}, n.acc, x.device());
    n.mean = Tensor::empty({c}, n.acc, x.device());
    Tensor var = Tensor::empty({c}, n.acc, x.device());
    Tensor ws;
    CNN_KERNEL(x.device(), batch_norm_stats, x.dtype(), x.data(), m, c, n.mean.data(), var.data(),
               reduction_workspace(x.dtype(), m, c, x.device(), ws));
    const void* count = nullptr;  // the batch's count per channel: m here, every rank's with SyncBN
    if (n.across) {
      distributed::GlobalBatchStats global = distributed::combine_batch_stats(*n.across, n.mean, var, m);
      n.mean = global.mean;
      var = global.var;
      n.global_count = global.count;
      count = n.global_count.data();
    }
    // invstd and the running statistics (momentum, unbiased variance) in one kernel.
    CNN_KERNEL(x.device(), batch_norm_update_stats, n.acc, n.mean.data(), var.data(), c, m, count, momentum, eps,
               n.invstd.data(), data_or_null(running_mean), data_or_null(running_var));
  } else {
    n.mean = running_mean.detach().clone();
    n.invstd = running_invstd(running_var, eps, m);
  }
  return n;
}

// The per-channel sums the input gradient needs: this rank's, or with SyncBN those over every rank's
// batch (the weight and bias gradients stay this rank's sums).
std::pair<Tensor, Tensor> input_gradient_sums(const Normalisation& n, const Tensor& sum_dz, const Tensor& sum_dz_xhat) {
  if (!n.across) return {sum_dz, sum_dz_xhat};
  Tensor all_dz = sum_dz.clone(), all_dz_xhat = sum_dz_xhat.clone();
  distributed::reduce_backward_sums(*n.across, all_dz, all_dz_xhat, n.global_count, n.m);
  return {all_dz, all_dz_xhat};
}

// What the backward of a batch norm works from, besides dy: the forward's inputs and statistics.
struct BatchNormSaved {
  Normalisation n;
  Tensor x, weight, bias;
  Tensor y;  // for the relu mask; undefined where the CPU takes it from x (or without a relu)
  BatchNormActivation activation;
  bool training;
  bool want_x, want_w, want_b, want_r;
};

// A gradient that arrives pooled: dy is the gradient of max_pool2d(relu(BatchNorm(x))) and the
// CPU kernels of kernels/batch_norm_pool.h spread it back through argmax as they go.
struct PooledGradient {
  kernels::PoolGeometry g;
  Tensor argmax;
};

// {dx, dweight, dbias, dresidual} (undefined where not wanted) from dy, the gradient of the
// normalisation's (activated) output, or of its max-pooled output when `pooled` is given.
std::vector<Tensor> batch_norm_backward(const BatchNormSaved& s, const Tensor& dy, const PooledGradient* pooled = nullptr) {
  const Normalisation& n = s.n;
  const int64_t c = n.c, m = n.m;
  Tensor sum_dz = Tensor::empty({c}, n.acc, dy.device()), sum_dz_xhat = Tensor::empty({c}, n.acc, dy.device());
  if (pooled) {
    CNN_CPU_KERNEL(batch_norm_relu_max_pool_backward_reduce, dy.dtype(), pooled->g, dy.data(),
                   pooled->argmax.data_as<int32_t>(), s.x.data(), n.mean.data(), n.invstd.data(),
                   data_or_null(s.weight), data_or_null(s.bias), sum_dz.data(), sum_dz_xhat.data());
  } else {
    Tensor ws;
    CNN_KERNEL(dy.device(), batch_norm_backward_reduce, dy.dtype(), dy.data(), data_or_null(s.y), s.x.data(), m, c,
               n.mean.data(), n.invstd.data(), data_or_null(s.weight), data_or_null(s.bias), s.activation,
               sum_dz.data(), sum_dz_xhat.data(), reduction_workspace(dy.dtype(), m, c, dy.device(), ws));
  }
  std::vector<Tensor> out(4);
  if (s.want_x || s.want_r) {
    const auto [all_dz, all_dz_xhat] = input_gradient_sums(n, sum_dz, sum_dz_xhat);
    Tensor dx = s.want_x ? Tensor::empty(s.x.shape(), s.x.dtype(), s.x.device()) : Tensor();
    Tensor dr = s.want_r ? Tensor::empty(s.x.shape(), s.x.dtype(), s.x.device()) : Tensor();
    if (pooled && s.want_x)  // (no residual after a pooled BatchNorm)
      CNN_CPU_KERNEL(batch_norm_relu_max_pool_backward_input, dy.dtype(), pooled->g, dy.data(),
                     pooled->argmax.data_as<int32_t>(), s.x.data(), n.mean.data(), n.invstd.data(),
                     data_or_null(s.weight), data_or_null(s.bias), all_dz.data(), all_dz_xhat.data(), s.training,
                     dx.data());
    else if (!pooled)
      CNN_KERNEL(dy.device(), batch_norm_backward_input, dy.dtype(), dy.data(), data_or_null(s.y), s.x.data(), m, c,
                 n.mean.data(), n.invstd.data(), data_or_null(s.weight), data_or_null(s.bias), all_dz.data(),
                 all_dz_xhat.data(), s.training, s.activation, data_or_null(dx), data_or_null(dr), nullptr);
    out[0] = dx;
    out[3] = dr;
  }
  if (s.want_w) out[1] = sum_dz_xhat;
  if (s.want_b) out[2] = sum_dz;
  return out;
}

// Whether the CPU backward can take the relu mask from x (kernels/batch_norm.h), which saves it a
// read of y and the tape a reference to y.
bool mask_from_x(const Tensor& x, BatchNormActivation activation) {
  return x.device().is_cpu() && kernels::cpu::batch_norm_mask_from_input(x.dtype(), activation);
}
}  // namespace

Tensor batch_norm2d(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& running_mean,
                    const Tensor& running_var, bool training, double momentum, double eps,
                    BatchNormActivation activation, const Tensor& residual, distributed::Communicator* sync) {
  if (activation == BatchNormActivation::add_relu) {
    op_checks::same_device_dtype("batch_norm2d", x, residual);
    CNN_CHECK(residual.shape() == x.shape(), "batch_norm2d: residual ", describe(residual), " must match ", describe(x));
  }
  BatchNormSaved s{prepare_normalisation(x, weight, bias, running_mean, running_var, training, momentum, eps, sync),
                   x, weight, bias, Tensor(), activation, training,
                   x.requires_grad(), weight.requires_grad(), bias.requires_grad(),
                   activation == BatchNormActivation::add_relu && residual.requires_grad()};
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
  const void* res = activation == BatchNormActivation::add_relu ? residual.data() : nullptr;
  CNN_KERNEL(x.device(), batch_norm_forward, x.dtype(), x.data(), s.n.m, s.n.c, s.n.mean.data(), s.n.invstd.data(),
             data_or_null(weight), data_or_null(bias), res, activation, y.data(), nullptr);
  if (activation != BatchNormActivation::none && !mask_from_x(x, activation)) s.y = y.detach();
  record_op("batch_norm2d", {x, weight, bias, activation == BatchNormActivation::add_relu ? residual : Tensor()}, {y},
            [s](const std::vector<Tensor>& grads) { return batch_norm_backward(s, grads[0]); });
  return y;
}

Tensor batch_norm_relu_max_pool2d(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& running_mean,
                                  const Tensor& running_var, bool training, double momentum, double eps,
                                  const Pool2dOptions& pool, distributed::Communicator* sync) {
  // The fused forward where the backward needs no y (the CPU in f32/f64) and the windows cannot
  // overlap (with overlapping ones, like ResNet's 3x3/2 stem, each pixel's row would be computed
  // for every window it lies in: measured slower than the two kernels); elsewhere the two ops.
  const bool disjoint_windows = pool.stride_h >= pool.kernel_h && pool.stride_w >= pool.kernel_w;
  if (!mask_from_x(x, BatchNormActivation::relu) || !disjoint_windows)
    return max_pool2d(batch_norm2d(x, weight, bias, running_mean, running_var, training, momentum, eps,
                                   BatchNormActivation::relu, Tensor(), sync),
                      pool);
  const kernels::PoolGeometry g = op_geometry::pool_windows("batch_norm_relu_max_pool2d", x, pool);
  const BatchNormSaved s{
      prepare_normalisation(x, weight, bias, running_mean, running_var, training, momentum, eps, sync),
      x, weight, bias, Tensor(), BatchNormActivation::relu, training,
      x.requires_grad(), weight.requires_grad(), bias.requires_grad(), false};
  Tensor y = Tensor::empty({g.n, g.oh, g.ow, g.c}, x.dtype(), x.device());
  Tensor argmax = Tensor::empty({g.n, g.oh, g.ow, g.c}, DType::i32, x.device());
  CNN_CPU_KERNEL(batch_norm_relu_max_pool_forward, x.dtype(), g, x.data(), s.n.mean.data(), s.n.invstd.data(),
                 data_or_null(weight), data_or_null(bias), y.data(), argmax.data_as<int32_t>());
  record_op("batch_norm_relu_max_pool2d", {x, weight, bias}, {y},
            [s, pooled = PooledGradient{g, argmax}](const std::vector<Tensor>& grads) -> std::vector<Tensor> {
              // The batch norm's backward with the max-pool's inside its passes.
              std::vector<Tensor> out = batch_norm_backward(s, grads[0], &pooled);
              out.pop_back();  // no residual
              return out;
            });
  return y;
}

bool conv2d_batch_norm_relu_max_pool2d_fuses(const Tensor& x, const Tensor& conv_weight, const Tensor& conv_bias,
                                             const Conv2dOptions& conv, const Tensor& weight, const Tensor& bias,
                                             const Pool2dOptions& pool) {
  const bool disjoint_windows = pool.stride_h >= pool.kernel_h && pool.stride_w >= pool.kernel_w;
  return x.device().is_cpu() && (x.dtype() == DType::f32 || x.dtype() == DType::f64) && conv.groups == 1 &&
         x.dim() == 4 && x.size(3) <= kernels::cpu::kConvPoolMaxInputChannels && disjoint_windows &&
         !needs_record({&x, &conv_weight, &conv_bias, &weight, &bias});
}

Tensor conv2d_batch_norm_relu_max_pool2d(const Tensor& x, const Tensor& conv_weight, const Tensor& conv_bias,
                                         const Conv2dOptions& conv, const Tensor& weight, const Tensor& bias,
                                         const Tensor& running_mean, const Tensor& running_var, double eps,
                                         const Pool2dOptions& pool) {
  if (!conv2d_batch_norm_relu_max_pool2d_fuses(x, conv_weight, conv_bias, conv, weight, bias, pool))
    return batch_norm_relu_max_pool2d(conv2d(x, conv_weight, conv_bias, conv), weight, bias, running_mean, running_var,
                                      false, 0.0, eps, pool);
  const kernels::ConvGeometry cg = op_geometry::conv_windows(x, conv_weight, conv_bias, conv);
  const std::string conv_output = detail::concat("the convolution's output ", Shape({cg.n, cg.oh, cg.ow, cg.o}).str());
  kernels::PoolGeometry input{.n = cg.n, .h = cg.oh, .w = cg.ow, .c = cg.o};
  const kernels::PoolGeometry pg =
      op_geometry::pool_windows_over("conv2d_batch_norm_relu_max_pool2d", input, conv_output, pool);
  const DType acc = accumulate_dtype(x.dtype());
  check_channel_tensors(conv_output, x.device(), acc, cg.o, weight, bias, running_mean, running_var);
  CNN_CHECK(running_mean.defined() && running_var.defined(),
            "conv2d_batch_norm_relu_max_pool2d: needs running_mean and running_var (it normalises as eval mode)");
  const Tensor invstd = running_invstd(running_var, eps, cg.n * cg.oh * cg.ow);
  Tensor y = Tensor::empty({pg.n, pg.oh, pg.ow, pg.c}, x.dtype(), x.device());
  CNN_CPU_KERNEL(conv_batch_norm_relu_max_pool_forward, x.dtype(), cg, pg, x.data(), conv_weight.data(),
                 data_or_null(conv_bias), running_mean.data(), invstd.data(), data_or_null(weight), data_or_null(bias),
                 y.data());
  return y;
}

bool conv2d_batch_norm2d_folds(const Tensor& x, const Tensor& conv_weight, const Tensor& conv_bias,
                               const Conv2dOptions& conv, const Tensor& weight, const Tensor& bias,
                               BatchNormActivation activation, const Tensor& residual) {
  if (!x.device().is_cpu() || (x.dtype() != DType::f32 && x.dtype() != DType::bf16) || x.dim() != 4 ||
      conv_weight.dtype() != x.dtype() || conv_weight.dim() != 4 || conv.groups != 1 ||
      (activation == BatchNormActivation::add_relu) != residual.defined() ||
      needs_record({&x, &conv_weight, &conv_bias, &weight, &bias, &residual}) ||
      graph_capture::recording_cpu())  // a replay would reuse the scale and shift of the capture
    return false;
  const kernels::ConvGeometry g = op_geometry::conv_windows(x, conv_weight, conv_bias, conv);
  return cpu_convolution_folds(x.dtype(), g, residual.defined(), activation != BatchNormActivation::none);
}

Tensor conv2d_batch_norm2d(const Tensor& x, const Tensor& conv_weight, const Tensor& conv_bias,
                           const Conv2dOptions& conv, const Tensor& weight, const Tensor& bias,
                           const Tensor& running_mean, const Tensor& running_var, double eps,
                           BatchNormActivation activation, const Tensor& residual) {
  if (!conv2d_batch_norm2d_folds(x, conv_weight, conv_bias, conv, weight, bias, activation, residual))
    return batch_norm2d(conv2d(x, conv_weight, conv_bias, conv), weight, bias, running_mean, running_var, false, 0.0,
                        eps, activation, residual);
  const kernels::ConvGeometry g = op_geometry::conv_windows(x, conv_weight, conv_bias, conv);
  const Shape out{g.n, g.oh, g.ow, g.o};
  check_channel_tensors(detail::concat("the convolution's output ", out.str()), x.device(),
                        accumulate_dtype(x.dtype()), g.o, weight, bias, running_mean, running_var);
  CNN_CHECK(running_mean.defined() && running_var.defined(),
            "conv2d_batch_norm2d: needs running_mean and running_var (it normalises as eval mode)");
  if (residual.defined())
    CNN_CHECK(residual.shape() == out && residual.dtype() == x.dtype() && residual.device() == x.device(),
              "conv2d_batch_norm2d: the residual ", describe(residual), " must be ", dtype_name(x.dtype()), " ",
              out.str(), " like the output");
  // scale = weight * invstd and shift = bias - mean * scale (+ the convolution's bias * scale), in
  // double from the f32 statistics, then f32 for oneDNN.
  const std::vector<double> invstd = running_invstd(running_var, eps, g.n * g.oh * g.ow).to_doubles();
  const std::vector<double> mean = running_mean.to_doubles();
  const std::vector<double> w = weight.defined() ? weight.to_doubles() : std::vector<double>(g.o, 1.0);
  const std::vector<double> b = bias.defined() ? bias.to_doubles() : std::vector<double>(g.o, 0.0);
  const std::vector<double> cb = conv_bias.defined() ? conv_bias.to_doubles() : std::vector<double>(g.o, 0.0);
  std::vector<float> scale(static_cast<size_t>(g.o)), shift(static_cast<size_t>(g.o));
  for (size_t o = 0; o < scale.size(); ++o) {
    const double s = w[o] * invstd[o];
    scale[o] = static_cast<float>(s);
    shift[o] = static_cast<float>(b[o] + (cb[o] - mean[o]) * s);
  }
  Tensor y = Tensor::empty(out, x.dtype(), x.device());
  const profiler::Scope span("conv2d_batch_norm_forward", profiler::Category::op, x.device());
  CNN_CHECK(run_cpu_convolution_folded(x.dtype(), g, x.data(), conv_weight.data(), scale.data(), shift.data(),
                                       data_or_null(residual), activation != BatchNormActivation::none, y.data()),
            "conv2d_batch_norm2d: oneDNN declined a convolution it had taken");
  return y;
}

}  // namespace cnn
