// BatchNorm2d over NHWC activations: affine weight and bias [C] (initialised to 1 and 0) and the
// buffers running_mean, running_var and num_batches_tracked (an i64 scalar), torchvision's names.
// Training normalises with the batch statistics and updates the running ones (PyTorch's momentum
// convention); eval uses the running statistics. forward_fused() applies the engine's fused
// activation (ReLU, or residual add then ReLU) in the same pass. With a communicator set
// (set_sync, or sync_batch_norm for a whole model) it is SyncBatchNorm: training statistics over the
// batches of every rank.
#pragma once
#include <memory>

#include "engine/distributed/communicator.h"
#include "engine/ops.h"
#include "layers/module.h"

namespace cnn {

class BatchNorm2d : public Module {
 public:
  static constexpr double kDefaultEps = 1e-5;
  static constexpr double kDefaultMomentum = 0.1;

  explicit BatchNorm2d(int channels, double eps = kDefaultEps, double momentum = kDefaultMomentum);

  // Normalisation followed by `activation`; `residual` is added before the ReLU with add_relu.
  // The input must already be in the compute dtype (as inside a block).
  Tensor forward_fused(const Tensor& x, BatchNormActivation activation, const Tensor& residual = Tensor());
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
  const Tensor& weight() const { return parameter(weight_); }
  const Tensor& bias() const { return parameter(bias_); }
  const Tensor& running_mean() const { return buffer(running_mean_); }
  const Tensor& running_var() const { return buffer(running_var_); }
  int64_t num_batches_tracked() const;

 protected:
  Tensor compute(const Tensor& x) override;

 private:
  void count_batch();

  int channels_;
  double eps_;
  double momentum_;
  size_t weight_, bias_, running_mean_, running_var_, batches_;
  int64_t batches_on_host_ = 0;            // mirror of num_batches_tracked for a device buffer...
  const void* mirrored_buffer_ = nullptr;  // ...whose memory is this
  std::shared_ptr<distributed::Communicator> sync_;
};

// PyTorch's convert_sync_batchnorm: every BatchNorm2d of `model` synchronised over `comm`. Returns
// how many there are.
int sync_batch_norm(Module& model, const std::shared_ptr<distributed::Communicator>& comm);

}  // namespace cnn
