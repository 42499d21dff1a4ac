// Host side of the multi-tensor kernels: builds the slot table of a set of tensors
// (kernels/optimizer.h) and hands it to the kernels on the tensors' device (on CUDA, the table is
// copied to device memory first, so that one launch covers every tensor).
#pragma once
#include <functional>
#include <vector>

#include "engine/tensor.h"
#include "kernels/optimizer.h"

namespace cnn::train {

struct SlotTable {
  Device device;
  std::vector<kernels::MultiTensorSlot> slots;
  int64_t total = 0;  // elements of all slots

  // Appends a slot for `numel` elements, setting its position in the concatenation.
  kernels::MultiTensorSlot& add(int64_t numel);
};

// Calls on_cpu(slots) or on_cuda(slots, stream) with the table where the kernels can read it: host memory
// for the CPU, a device copy (alive until the call returns; the kernels run in stream order) for CUDA.
void run_on_slots(const SlotTable& table, const std::function<void(const kernels::MultiTensorSlot*)>& on_cpu,
                  const std::function<void(const kernels::MultiTensorSlot*, kernels::Stream)>& on_cuda);

// The optimizer kernel of `args` (SGD or AdamW) over the table.
void run_optimizer_kernel(const SlotTable& table, const kernels::SgdArgs& args);
void run_optimizer_kernel(const SlotTable& table, const kernels::AdamWArgs& args);

}  // namespace cnn::train
