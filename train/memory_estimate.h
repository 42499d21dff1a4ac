// Will the training step fit in memory? An estimate made before the first batch, from the model's
// shape trace, so that a batch size far too large is refused at once with the figures and a batch
// size that fits, instead of the process being killed by the system a minute later.
//
// The estimate: every layer's output for the whole batch, kept for the backward pass (the outputs of
// the leaf modules of trace_shapes, at the compute precision), plus the parameters with their
// gradients and optimizer state (f32), plus the loader's batches in flight. For the compact CNN on
// Fashion-MNIST it is within 20% above the measured growth of the process (516 KB per image estimated,
// 444 KB measured between batch sizes 1024 and 4096). With gradient checkpointing most activations
// are recomputed instead of kept, and no estimate is made.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "engine/device.h"
#include "engine/dtype.h"
#include "engine/shape.h"

namespace cnn {
class Module;
}

namespace cnn::train {

struct MemoryEstimate {
  uint64_t per_image = 0;    // activation bytes of one image
  uint64_t activations = 0;  // per_image x batch size
  uint64_t parameters = 0;   // weights, gradients and optimizer state
  uint64_t batches = 0;      // input batches held by the loader and the step
  uint64_t validation = 0;   // validation's per-class counts and confusion matrix (train/validation.h)
  uint64_t total() const { return activations + parameters + batches + validation; }
};

// `input`: the batch as the model takes it, NHWC. `optimizer_states`: f32 tensors the optimizer keeps
// per parameter (1 for SGD with momentum, 2 for AdamW). `batches_in_flight`: batches the loader holds.
MemoryEstimate estimate_step_memory(const Module& model, const Shape& input, DType compute, int optimizer_states,
                                    int64_t batches_in_flight);

// Memory the step can use on `device`, and where the figure comes from, for messages: on the CPU the
// kernel's MemAvailable, lowered to the cgroup's limit when the process runs under one; on a GPU the
// driver's free memory plus what the engine's allocator caches unused. nullopt when it cannot be read.
struct AvailableMemory {
  uint64_t bytes = 0;
  std::string source;  // "available on this machine", "free on cuda:0", ...
};
std::optional<AvailableMemory> available_memory(const Device& device);

// A cnn::Error when the estimate exceeds the available memory: the estimate and its parts, the
// memory there is, and the largest batch size that fits (`batch_origin` names where the batch size
// was set). Returns a warning when it takes more than 80% of it, "" when it fits comfortably.
std::string check_step_memory(const MemoryEstimate& estimate, const AvailableMemory& available, int64_t batch_size,
                              const std::string& batch_origin);

}  // namespace cnn::train
