// The memory estimate of a training step (memory_estimate.h): a sum over the model's shape trace,
// and the memory the system reports free.
#include "train/memory_estimate.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "engine/allocator.h"
#include "engine/cuda_context.h"
#include "engine/error.h"
#include "layers/module.h"
#include "layers/shape_trace.h"
#include "train/log/progress_format.h"

namespace cnn::train {

namespace {

// "MemAvailable:   12345678 kB" from /proc/meminfo, in bytes.
std::optional<uint64_t> mem_available() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  uint64_t kib = 0;
  std::string unit;
  while (in >> key >> kib >> unit)
    if (key == "MemAvailable:") return kib * 1024;
  return std::nullopt;
}

// The cgroup (v2) limit minus what the group uses, when the process runs under a limit.
std::optional<uint64_t> cgroup_headroom() {
  std::ifstream max_file("/sys/fs/cgroup/memory.max"), current_file("/sys/fs/cgroup/memory.current");
  std::string max_text;
  uint64_t current = 0;
  if (!(max_file >> max_text) || max_text == "max" || !(current_file >> current)) return std::nullopt;
  uint64_t limit = 0;
  std::istringstream(max_text) >> limit;
  return limit > current ? limit - current : 0;
}

std::string gib(uint64_t bytes) { return format_bytes(static_cast<double>(bytes)); }

}  // namespace

MemoryEstimate estimate_step_memory(const Module& model, const Shape& input, DType compute, int optimizer_states,
                                    int64_t batches_in_flight) {
  const int64_t batch = input[0];
  Shape one = input;
  one[0] = 1;
  const ShapeTrace trace = trace_shapes(model, one);
  uint64_t elements = 0;
  for (const LayerSummary& layer : trace.layers())
    if (layer.leaf) elements += static_cast<uint64_t>(layer.output.numel());
  MemoryEstimate e;
  e.per_image = elements * static_cast<uint64_t>(dtype_size(compute));
  e.activations = e.per_image * static_cast<uint64_t>(batch);
  e.parameters = static_cast<uint64_t>(model.parameter_count()) * sizeof(float) * static_cast<uint64_t>(2 + optimizer_states);
  e.batches = static_cast<uint64_t>(input.numel()) * sizeof(float) * static_cast<uint64_t>(batches_in_flight);
  return e;
}

std::optional<AvailableMemory> available_memory(const Device& device) {
  if (device.is_cuda()) {
    const cuda::DeviceMemory m = cuda::memory_info(device.index);
    const AllocatorStats cached = cuda_allocator(device.index).stats();
    return AvailableMemory{m.free + (cached.reserved - cached.in_use), "free on " + device.str() + " (of " + gib(m.total) + ")"};
  }
  std::optional<uint64_t> bytes = mem_available();
  if (!bytes) return std::nullopt;
  std::string source = "available on this machine";
  if (const std::optional<uint64_t> headroom = cgroup_headroom(); headroom && *headroom < *bytes) {
    bytes = headroom;
    source = "left under this process's memory limit (cgroup)";
  }
  return AvailableMemory{*bytes, source};
}

std::string check_step_memory(const MemoryEstimate& estimate, const AvailableMemory& available, int64_t batch_size,
                              const std::string& batch_origin) {
  const std::string parts = gib(estimate.total()) + " (activations " + gib(estimate.activations) + ": " +
                            gib(estimate.per_image) + " per image x " + std::to_string(batch_size) +
                            "; parameters, gradients and optimizer state " + gib(estimate.parameters) + "; input batches " +
                            gib(estimate.batches) +
                            (estimate.validation ? "; validation counts " + gib(estimate.validation) : std::string()) + ")";
  if (estimate.total() > available.bytes) {
    // The largest batch whose activations and input batches fit beside the parameters.
    const uint64_t per_image = estimate.per_image + estimate.batches / static_cast<uint64_t>(std::max<int64_t>(batch_size, 1));
    const uint64_t fixed = estimate.parameters + estimate.validation;  // whatever the batch size
    const uint64_t room = available.bytes > fixed ? available.bytes - fixed : 0;
    const uint64_t fits = per_image > 0 ? room * 8 / 10 / per_image : 0;  // 80%: room for everything not estimated
    std::string advice = fits > 0 ? "use a batch size of at most about " + std::to_string(fits)
                                  : "the model's parameters alone do not fit: use a smaller model";
    throw Error("the training step needs about " + parts + " but " + gib(available.bytes) + " is " + available.source +
                "; " + advice + " (data.batch_size, from " + batch_origin +
                "), with [train] accumulate to keep the global batch, or [train] checkpointing = blocks");
  }
  if (estimate.total() * 10 > available.bytes * 8)
    return "the training step needs about " + parts + ", more than 80% of the " + gib(available.bytes) + " " +
           available.source + "; if the system starts swapping or kills the run, lower data.batch_size";
  return "";
}

}  // namespace cnn::train
