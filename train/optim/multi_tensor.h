// Host side of the multi-tensor kernels: builds the slot table of a set of tensors
// (kernels/optimizer.h). Both backends read it from host memory (CUDA passes it to the kernels as
// launch parameters), so running a kernel over it needs no upload and no synchronisation.
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
};

// The optimizer kernel of `args` (SGD or AdamW) over the table.
void run_optimizer_kernel(const SlotTable& table, const kernels::SgdArgs& args);
void run_optimizer_kernel(const SlotTable& table, const kernels::AdamWArgs& args);

}  // namespace cnn::train
