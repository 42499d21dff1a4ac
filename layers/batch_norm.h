// BatchNorm2d over NHWC activations: affine weight and bias [C] (initialised to 1 and 0) and the
// buffers running_mean, running_var and num_batches_tracked (an i64 scalar), torchvision's names.
// Training normalises with the batch statistics and updates the running ones (PyTorch's momentum
// convention; or, with set_cumulative_average, PyTorch's momentum = None: the running statistics
// are the plain average of every batch's since they were reset); eval uses the running statistics. forward_fused() applies the engine's fused
// activation (ReLU, or residual add then ReLU) in the same pass. With a communicator set
// (set_sync, or sync_batch_norm for a whole model) it is SyncBatchNorm: training statistics over the
// batches of every rank.
#pragma once
#include <memory>
#include <utility>

#include "engine/distributed/communicator.h"
#include "engine/ops.h"
#include "layers/conv2d.h"
#include "layers/module.h"

namespace cnn {

class BatchNorm2d : public Module {
 public:
  static constexpr double kDefaultEps = 1e-5;
  static constexpr double kDefaultMomentum = 0.1;

  explicit BatchNorm2d(int channels, double eps = kDefaultEps, double momentum = kDefaultMomentum);

  // Normalisation followed by `activation`; `residual` is added before the ReLU with add_relu.
  // The input must already be in the compute dtype (as inside a block). Like forward(), a span of
  // the profiler named by the module's path.
  Tensor forward_fused(const Tensor& x, BatchNormActivation activation, const Tensor& residual = Tensor());
  // Normalisation, ReLU and max_pool2d with `pool` as one engine op (batch_norm_relu_max_pool2d: the
  // same bits as the three in turn), in this module's profiler span.
  Tensor forward_fused_max_pool(const Tensor& x, const Pool2dOptions& pool);
  // conv, then forward_fused_max_pool. In eval mode one engine op (conv2d_batch_norm_relu_max_pool2d,
  // which for a first layer on the CPU never stores the convolution's output), in this module's
  // profiler span alone (the convolution has none of its own then).
  Tensor forward_conv_fused_max_pool(Conv2d& conv, const Tensor& x, const Pool2dOptions& pool);
  // conv, then forward_fused. In eval mode, where the engine folds this BatchNorm into the
  // convolution (conv2d_batch_norm2d: oneDNN on the CPU), one op in this module's profiler span.
  Tensor forward_conv_fused(Conv2d& conv, const Tensor& x, BatchNormActivation activation,
                            const Tensor& residual = Tensor());
  // Initialise the scale to zero instead of one (the last BN of a residual block, so that each block
  // starts as the identity).
  void zero_init_weight();
  // SyncBN over `comm`'s ranks (null: back to per-rank statistics).
  void set_sync(std::shared_ptr<distributed::Communicator> comm) { sync_ = std::move(comm); }
  bool synced() const { return sync_ != nullptr; }

  Shape infer_shape(const Shape& input, ShapeTrace& trace) const override;
  int channels() const { return channels_; }
  double eps() const { return eps_; }
  double momentum() const { return momentum_; }
  // PyTorch's momentum = None (what torch.optim.swa_utils.update_bn sets): batch n updates the
  // running statistics with momentum 1/n, n counted by num_batches_tracked, so that they become
  // the equal-weight average of the batches' statistics. false: back to momentum().
  void set_cumulative_average(bool on) { cumulative_ = on; }
  // Running mean 0, running variance 1, num_batches_tracked 0 (PyTorch's reset_running_stats).
  void reset_running_stats();
  const Tensor& weight() const { return parameter(weight_); }
  const Tensor& bias() const { return parameter(bias_); }
  const Tensor& running_mean() const { return buffer(running_mean_); }
  const Tensor& running_var() const { return buffer(running_var_); }
  int64_t num_batches_tracked() const;

 protected:
  Tensor compute(const Tensor& x) override;

 private:
  int64_t count_batch();  // with the cumulative average: counts the batch, returns the new count
  // The statistics dtype for inputs of dtype `input`, with the running statistics moved to it.
  DType keep_statistics_in(DType input);
  // weight and bias in the statistics dtype (cast where the masters differ, the cast recorded).
  std::pair<Tensor, Tensor> affine_in(DType statistics) const;
  // forward_fused (or, with `pool`, forward_fused_max_pool) without its span.
  Tensor normalize(const Tensor& x, BatchNormActivation activation, const Tensor& residual,
                   const Pool2dOptions* pool = nullptr);

  int channels_;
  double eps_;
  double momentum_;
  bool cumulative_ = false;
  size_t weight_, bias_, running_mean_, running_var_, batches_;
  int64_t batches_on_host_ = 0;            // mirror of num_batches_tracked for a device buffer...
  const void* mirrored_buffer_ = nullptr;  // ...whose memory is this
  std::shared_ptr<distributed::Communicator> sync_;
};

// PyTorch's convert_sync_batchnorm: every BatchNorm2d of `model` synchronised over `comm`. Returns
// how many there are.
int sync_batch_norm(Module& model, const std::shared_ptr<distributed::Communicator>& comm);

}  // namespace cnn
