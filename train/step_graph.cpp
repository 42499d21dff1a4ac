// The captured training step (see step_graph.h).
#include "train/step_graph.h"

#include <cstring>

#include "engine/async_copy.h"
#include "engine/cnn.h"
#include "train/distributed/data_parallel.h"
#include "train/learner.h"
#include "train/train_settings.h"

namespace cnn::train {

std::string step_graph_obstacle(const TrainSettings& settings, int64_t world_size) {
  if (settings.loop.accumulate > 1)
    return "gradient accumulation ([train] accumulate = " + std::to_string(settings.loop.accumulate) +
           ") makes a step of several micro-batches";
  if (world_size > 1) return "the gradient all-reduce of data-parallel training is not captured";
  if (settings.loss.mixing) return "MixUp and CutMix draw each batch's mixing on the host";
  return "";
}

// Pinned host buffers the step's numbers (learning rates, masks' seed) go up from, in turn: a pair
// is rewritten only once the copy that last read it has run, and with several in flight the host
// never waits in practice.
struct StepGraph::StepNumberUploads {
  static constexpr int kBuffers = 4;
  std::vector<std::vector<Tensor>> host;  // {learning rates, seed} per buffer
  std::vector<std::shared_ptr<cuda::Event>> copied;
  int next = 0;
};

StepGraph::StepGraph(Learner& learner, const TrainSettings& settings, DataParallel& data_parallel)
    : learner_(learner), settings_(settings), data_parallel_(data_parallel), uploads_(std::make_unique<StepNumberUploads>()) {}

StepGraph::~StepGraph() = default;

bool StepGraph::fits(const MicroBatch& batch) const {
  if (!graph_) return true;
  return batch.images.shape() == images_.shape() && batch.images.dtype() == images_.dtype() &&
         batch.labels.shape() == labels_.shape() && batch.labels.dtype() == labels_.dtype();
}

AllocatorStats StepGraph::memory() const { return graph_ ? graph_->memory() : AllocatorStats{}; }

// What the captured kernels point at besides the graph's own tensors: the weights with their
// optimizer state and low-precision copies, the buffers, and the loss scaler's control block. Any
// of them replaced means the graph would read or write memory that is no longer theirs.
std::vector<const void*> StepGraph::bound_memory() const {
  std::vector<const void*> bound = learner_.optimizer->memory_used();
  for (const NamedTensor& buffer : learner_.model->named_buffers()) bound.push_back(buffer.tensor.data());
  bound.push_back(learner_.scaler.control().data());
  return bound;
}

bool StepGraph::prepare(const MicroBatch& batch, int64_t step) {
  if (graph_ && bound_memory() == bound_) return true;
  if (graph_) {
    recapture_reason_ = "the model's or the optimizer's tensors were replaced since the last capture (weights "
                        "loaded, parameters frozen or unfrozen)";
    graph_.reset();
    return false;
  }
  const Device device = learner_.model->device();
  images_ = Tensor::empty(batch.images.shape(), batch.images.dtype(), device);
  labels_ = Tensor::empty(batch.labels.shape(), batch.labels.dtype(), device);
  group_lrs_ = Tensor::zeros({static_cast<int64_t>(learner_.optimizer->groups().size())}, DType::f32, device);
  masks_seed_ = Tensor::zeros({}, DType::i64, device);
  const MicroBatch inputs{
      .images = images_, .labels = labels_, .epoch = batch.epoch, .index = batch.index, .masks_seed_on_device = masks_seed_};
  const std::vector<const void*> before = bound_memory();
  auto state = learner_.optimizer->state_handles();
  Tensor loss;
  try {
    graph_ = std::make_unique<CapturedGraph>(
        device,
        [&] {
          loss = forward_backward(learner_, inputs, settings_);
          optimizer_step(learner_, step, settings_.optim.clip_grad_norm, nullptr, data_parallel_, group_lrs_);
        },
        "the training step");
    // State created during the capture (an optimizer's first step) would be reset at every replay.
    CNN_CHECK(bound_memory() == before, "the training step created or replaced tensors of the model or the optimizer "
              "during its capture (their first step must run eagerly first)");
  } catch (const Error&) {
    graph_.reset();
    learner_.optimizer->zero_grad();  // gradients of a capture that never ran
    learner_.optimizer->restore_state_handles(std::move(state));  // not state whose zero-fill never ran
    throw;
  }
  loss_ = loss;
  bound_ = before;
  ++captures_;
  return true;
}

void StepGraph::write_step_numbers(const MicroBatch& batch, int64_t step) {
  const std::vector<float> lrs = learner_.optimizer->group_learning_rates(learner_.schedule.lr(step));
  const auto seed = static_cast<int64_t>(masks_seed(settings_, batch.epoch, batch.index));
  const Device device = group_lrs_.device();
  if (device.is_cpu()) {
    group_lrs_.copy_(Tensor::from_vector(lrs, group_lrs_.shape()));
    masks_seed_.copy_(Tensor::from_vector<int64_t>({seed}, {}));
    return;
  }
  StepNumberUploads& u = *uploads_;
  if (u.host.empty()) {
    for (int i = 0; i < StepNumberUploads::kBuffers; ++i)
      u.host.push_back({Tensor::empty(group_lrs_.shape(), DType::f32, Device::cpu(), /*pinned=*/true),
                        Tensor::empty({}, DType::i64, Device::cpu(), /*pinned=*/true)});
    u.copied.resize(StepNumberUploads::kBuffers);
  }
  const int slot = u.next;
  u.next = (u.next + 1) % StepNumberUploads::kBuffers;
  if (u.copied[slot]) u.copied[slot]->synchronize();  // its copy of steps ago has long run
  std::memcpy(u.host[slot][0].data(), lrs.data(), lrs.size() * sizeof(float));
  std::memcpy(u.host[slot][1].data(), &seed, sizeof seed);
  const Upload up = upload_async(u.host[slot], device);
  up.make_compute_wait();
  group_lrs_.copy_(up.tensors[0]);
  masks_seed_.copy_(up.tensors[1]);
  u.copied[slot] = up.completion();
}

Tensor StepGraph::replay(const MicroBatch& batch, int64_t step) {
  CNN_CHECK(graph_ && fits(batch), "StepGraph::replay: call prepare first, with a batch of the captured shapes");
  images_.copy_(batch.images);
  labels_.copy_(batch.labels);
  write_step_numbers(batch, step);
  graph_->replay();
  return loss_;
}

}  // namespace cnn::train
