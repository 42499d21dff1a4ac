// The data-parallel side of a training run (DDP): every rank holds the whole model and trains on
// its shard of each epoch (the loader's rank and world size); this file makes the ranks agree.
//   - at start: rank 0's parameters and buffers on every rank (whatever each rank's seed drew), and
//     a refusal when the ranks were given different configs or models;
//   - every optimizer step: the gradients averaged across ranks (GradientReducer, overlapped with
//     the last micro-batch's backward), and the inf/nan verdict shared so every rank skips the same
//     steps;
//   - with [model] sync_bn: BatchNorm statistics over the global batch (layers/batch_norm.h).
// In a single process (world size 1) it holds the single communicator and does nothing else.
#pragma once
#include <memory>
#include <string>

#include "data/dataset.h"
#include "engine/distributed/communicator.h"
#include "layers/module.h"
#include "train/distributed/gradient_reducer.h"
#include "train/optim/grad_norm.h"

namespace cnn::train {

struct TrainSettings;
class RunLog;

class DataParallel {
 public:
  // Connects to the other ranks of settings.distributed.world (engine/distributed/communicator.h).
  explicit DataParallel(const TrainSettings& settings);

  distributed::Communicator& comm() { return *comm_; }
  const distributed::World& world() const { return comm_->world(); }
  bool active() const { return comm_->world_size() > 1; }

  // Once the model is built and restored: sync_bn, the broadcast from rank 0, the consistency check
  // of the resolved config and the model's shapes, and the gradient buckets.
  void prepare(Module& model, const TrainSettings& settings, RunLog& log);

  // The reducer to attach to the tape of a step's last micro-batch; null in a single process.
  GradientReducer* reducer() { return reducer_.get(); }
  // After the last backward of a step: the averaged gradients in .grad.
  void finish_gradients() {
    if (reducer_) reducer_->finish();
  }
  // Every rank's measurements of a step's gradients ({sum of squares, inf/nan count} on the device)
  // made one, in place: the largest inf/nan count wins, so every rank skips the same steps.
  Tensor agree(const Tensor& measured);

 private:
  distributed::CommunicatorPtr comm_;
  std::unique_ptr<GradientReducer> reducer_;
};

// Rank 0's parameters and buffers copied to every rank.
void broadcast_model(distributed::Communicator& comm, Module& model);
// A cnn::Error on every rank when some rank's `fingerprint` differs from rank 0's, naming the ranks.
void check_same_on_every_rank(distributed::Communicator& comm, const std::string& fingerprint, const std::string& what);

// A cnn::Error on every rank when some rank sees other data at `spec` than rank 0 (ranks started
// in other folders: `mpirun -wdir a : -wdir b`): the image count, the class names and a
// fingerprint of the file list are compared; a differing rank's message gives both ranks' values.
void check_same_data_on_every_rank(distributed::Communicator& comm, const data::Dataset& dataset, const std::string& spec);

}  // namespace cnn::train
