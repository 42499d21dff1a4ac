// Host side of the multi-tensor kernels: builds the slot table of a set of tensors
// (kernels/optimizer.h) and puts it where the kernels on the tensors' device read it (on CUDA, the
// table is copied to device memory first, so that one launch covers every tensor).
#pragma once
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

  // The table where the kernels on `device` read it, for CNN_KERNEL (engine/backend.h): the host
  // vector for the CPU; for CUDA a device copy held by `device_copy`, which the caller keeps until
  // the kernel is enqueued (the kernels run in stream order, so the memory is not reused early).
  const kernels::MultiTensorSlot* kernel_slots(Tensor& device_copy) const;
};

// The optimizer kernel of `args` (SGD or AdamW) over the table.
void run_optimizer_kernel(const SlotTable& table, const kernels::SgdArgs& args);
void run_optimizer_kernel(const SlotTable& table, const kernels::AdamWArgs& args);

}  // namespace cnn::train
