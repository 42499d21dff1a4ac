// [train] cuda_graphs: the training step captured once as a graph (engine/graph.h) and replayed at
// every step, like PyTorch's whole-network capture (torch.cuda.graphs). One replay launches the
// whole step (forward, loss, backward, unscaling, the inf/nan verdict, the update and the zeroing
// of the gradients), so the host no longer issues a thousand kernel launches per step and the GPU
// never waits for it. On the CPU the same capture records the step's kernel calls and replays them
// (the emulation that tests this file without a GPU).
//
// A replay repeats what the capture's host code decided, so the step's inputs live in tensors the
// graph owns: each step copies the batch into the static images and labels, the schedule's
// learning rates into a device tensor the optimizer kernel reads (Optimizer::step with group_lrs),
// and the batch's masks' seed into one the dropout kernels derive their seeds from
// (Module::reseed_on_device). Everything else the step reads is already on the device (the loss
// scale, the verdict, the step counts, BatchNorm's counts). What would change the captured work is
// caught:
//   - a run whose steps cannot be captured at all is named by step_graph_obstacle() (accumulation,
//     data parallelism, MixUp/CutMix) and trains eagerly;
//   - a batch of other shapes (the last one of an epoch) runs eagerly (fits());
//   - tensors of the learner replaced since the capture (a checkpoint loaded, parameters frozen or
//     unfrozen) drop the graph: that step runs eagerly, the next one captures again;
//   - a capture that fails (a host read or sync in the step: engine/host_sync_check.h) throws
//     cnn::Error with its reason; the trainer then trains eagerly and logs why.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/graph.h"
#include "engine/tensor.h"
#include "train/train_step.h"

namespace cnn::train {

struct Learner;
struct TrainSettings;
class DataParallel;

// Why this run's steps cannot be captured, for the log; empty when they can.
std::string step_graph_obstacle(const TrainSettings& settings, int64_t world_size);

class StepGraph {
 public:
  StepGraph(Learner& learner, const TrainSettings& settings, DataParallel& data_parallel);
  ~StepGraph();
  StepGraph(const StepGraph&) = delete;
  StepGraph& operator=(const StepGraph&) = delete;

  // Whether `batch` can take the graph: the shapes and dtypes of the captured batch (any batch
  // before the first capture).
  bool fits(const MicroBatch& batch) const;
  // Readies the graph for a step on `batch`: captures the step if there is no graph yet. When the
  // learner's tensors were replaced since the capture, drops the graph and returns false: this
  // step runs eagerly (it creates what the new tensors need, as an optimizer's state at a
  // parameter's first step), the next one captures again (recapture_reason() says why). A capture
  // that fails throws cnn::Error with the reason and leaves the learner as it was (no gradients,
  // no optimizer state made during the capture).
  bool prepare(const MicroBatch& batch, int64_t step);
  // Optimizer step `step` on `batch` (after prepare): the batch and the learning rates into the
  // graph's tensors, then the replay. Returns the loss, a tensor of the graph that the next step
  // overwrites (read or copy it before).
  Tensor replay(const MicroBatch& batch, int64_t step);

  int64_t captures() const { return captures_; }
  const std::string& recapture_reason() const { return recapture_reason_; }
  // The graph's memory: what its tensors use and what its pool holds (zero before a capture).
  AllocatorStats memory() const;

 private:
  std::vector<const void*> bound_memory() const;
  // The schedule's learning rates and the batch's masks' seed into the graph's tensors.
  void write_step_numbers(const MicroBatch& batch, int64_t step);

  Learner& learner_;
  const TrainSettings& settings_;
  DataParallel& data_parallel_;
  std::unique_ptr<CapturedGraph> graph_;
  Tensor images_, labels_, group_lrs_, masks_seed_, loss_;  // the graph's inputs and output
  std::vector<const void*> bound_;              // the learner's memory the graph was captured with
  int64_t captures_ = 0;
  std::string recapture_reason_;
  struct StepNumberUploads;
  std::unique_ptr<StepNumberUploads> uploads_;
};

}  // namespace cnn::train
