// batch_norm2d over NHWC with fused activation (none, relu, residual add + relu). Training mode
// normalises with batch statistics and updates the running statistics in place (PyTorch's momentum
// convention, unbiased running variance); eval mode uses the running statistics. The backward uses
// the saved input, output (for the relu mask; on the CPU the mask of a plain relu is computed again
// from the input), mean and inverse standard deviation.
#include "engine/backend.h"
#include "engine/distributed/sync_batch_norm.h"
#include "engine/ops.h"
#include "engine/ops/kernel_workspace.h"
#include "engine/ops/op_checks.h"
#include "engine/tape.h"
#include "kernels/batch_norm.h"

namespace cnn {

namespace {
void check_channel_tensor(const char* what, const Tensor& t, const Tensor& x, DType acc, int64_t c) {
  if (!t.defined()) return;
  CNN_CHECK(t.dim() == 1 && t.size(0) == c && t.dtype() == acc && t.device() == x.device(), "batch_norm2d: ", what,
            " must be ", dtype_name(acc), " [", c, "] on ", x.device().str(), " for input ", describe(x), ", got ",
            describe(t));
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

Tensor batch_norm2d(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& running_mean,
                    const Tensor& running_var, bool training, double momentum, double eps,
                    BatchNormActivation activation, const Tensor& residual, distributed::Communicator* sync) {
  op_checks::floating("batch_norm2d", x);
  CNN_CHECK(x.dim() >= 2, "batch_norm2d: needs [N,H,W,C] (or [N,C]) input, got ", describe(x));
  const int64_t c = x.size(-1), m = x.numel() / std::max<int64_t>(c, 1);
  const DType acc = accumulate_dtype(x.dtype());
  check_channel_tensor("weight", weight, x, acc, c);
  check_channel_tensor("bias", bias, x, acc, c);
  check_channel_tensor("running_mean", running_mean, x, acc, c);
  check_channel_tensor("running_var", running_var, x, acc, c);
  CNN_CHECK(training || (running_mean.defined() && running_var.defined()),
            "batch_norm2d: eval mode needs running_mean and running_var");
  CNN_CHECK(running_mean.defined() == running_var.defined(), "batch_norm2d: pass both running_mean and running_var "
            "or neither, got ", describe(running_mean), " and ", describe(running_var));
  CNN_CHECK(!training || m > 1, "batch_norm2d: training needs more than one value per channel, got ", describe(x),
            "; use a larger batch or eval mode");
  if (activation == BatchNormActivation::add_relu) {
    op_checks::same_device_dtype("batch_norm2d", x, residual);
    CNN_CHECK(residual.shape() == x.shape(), "batch_norm2d: residual ", describe(residual), " must match ", describe(x));
  }

  // SyncBN (also over a world of one rank, where it computes what plain batch norm does).
  distributed::Communicator* const across = training && sync ? sync : nullptr;
  Tensor mean, invstd, global_count;
  {
    NoGrad no_grad;
    invstd = Tensor::empty({c}, acc, x.device());
    if (training) {
      mean = Tensor::empty({c}, acc, x.device());
      Tensor var = Tensor::empty({c}, acc, x.device());
      Tensor ws;
      CNN_KERNEL(x.device(), batch_norm_stats, x.dtype(), x.data(), m, c, mean.data(), var.data(),
                 reduction_workspace(x.dtype(), m, c, x.device(), ws));
      const void* count = nullptr;  // the batch's count per channel: m here, every rank's with SyncBN
      if (across) {
        distributed::GlobalBatchStats global = distributed::combine_batch_stats(*across, mean, var, m);
        mean = global.mean;
        var = global.var;
        global_count = global.count;
        count = global_count.data();
      }
      // invstd and the running statistics (momentum, unbiased variance) in one kernel.
      CNN_KERNEL(x.device(), batch_norm_update_stats, acc, mean.data(), var.data(), c, m, count, momentum, eps,
                 invstd.data(), data_or_null(running_mean), data_or_null(running_var));
    } else {
      mean = running_mean.detach().clone();
      CNN_KERNEL(x.device(), batch_norm_update_stats, acc, nullptr, running_var.data(), c, m, nullptr, 0.0, eps,
                 invstd.data(), nullptr, nullptr);
    }
  }

  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
  const void* res = activation == BatchNormActivation::add_relu ? residual.data() : nullptr;
  CNN_KERNEL(x.device(), batch_norm_forward, x.dtype(), x.data(), m, c, mean.data(), invstd.data(), data_or_null(weight),
             data_or_null(bias), res, activation, y.data(), nullptr);

  const bool want_x = x.requires_grad(), want_w = weight.requires_grad(), want_b = bias.requires_grad(),
             want_r = activation == BatchNormActivation::add_relu && residual.requires_grad();
  // The relu mask: from y, or on the CPU computed again from x (kernels/batch_norm.h), which saves
  // the backward a read of y and the tape a reference to it.
  const bool mask_from_x = x.device().is_cpu() && kernels::cpu::batch_norm_mask_from_input(x.dtype(), activation);
  const Tensor saved_y = activation == BatchNormActivation::none || mask_from_x ? Tensor() : y.detach();
  record_op("batch_norm2d", {x, weight, bias, activation == BatchNormActivation::add_relu ? residual : Tensor()}, {y},
            [=](const std::vector<Tensor>& grads) -> std::vector<Tensor> {
              const Tensor& dy = grads[0];
              Tensor sum_dz = Tensor::empty({c}, acc, dy.device()), sum_dz_xhat = Tensor::empty({c}, acc, dy.device());
              Tensor ws;
              CNN_KERNEL(dy.device(), batch_norm_backward_reduce, dy.dtype(), dy.data(), data_or_null(saved_y), x.data(),
                         m, c, mean.data(), invstd.data(), data_or_null(weight), data_or_null(bias), activation,
                         sum_dz.data(), sum_dz_xhat.data(),
                         reduction_workspace(dy.dtype(), m, c, dy.device(), ws));
              // SyncBN: the weight and bias gradients are this rank's sums; the input gradient needs
              // the sums over every rank's batch.
              Tensor input_sum_dz = sum_dz, input_sum_dz_xhat = sum_dz_xhat;
              if (across) {
                input_sum_dz = sum_dz.clone();
                input_sum_dz_xhat = sum_dz_xhat.clone();
                distributed::reduce_backward_sums(*across, input_sum_dz, input_sum_dz_xhat, global_count, m);
              }
              std::vector<Tensor> out(4);
              if (want_x || want_r) {
                Tensor dx = want_x ? Tensor::empty(x.shape(), x.dtype(), x.device()) : Tensor();
                Tensor dr = want_r ? Tensor::empty(x.shape(), x.dtype(), x.device()) : Tensor();
                void* dx_ptr = want_x ? dx.data() : nullptr;
                void* dr_ptr = want_r ? dr.data() : nullptr;
                CNN_KERNEL(dy.device(), batch_norm_backward_input, dy.dtype(), dy.data(), data_or_null(saved_y), x.data(),
                           m, c, mean.data(), invstd.data(), data_or_null(weight), data_or_null(bias),
                           input_sum_dz.data(),
                           input_sum_dz_xhat.data(),
                           training, activation, dx_ptr, dr_ptr, nullptr);
                out[0] = dx;
                out[3] = dr;
              }
              if (want_w) out[1] = sum_dz_xhat;
              if (want_b) out[2] = sum_dz;
              return out;
            });
  return y;
}

}  // namespace cnn
