// Slot tables and the optimizer kernels over them.
#include "train/optim/multi_tensor.h"

#include "engine/backend.h"
#include "engine/graph.h"

namespace cnn::train {

kernels::MultiTensorSlot& SlotTable::add(int64_t numel) {
  kernels::MultiTensorSlot& s = slots.emplace_back();
  s.numel = numel;
  s.start = total;
  total += numel;
  return s;
}

namespace {
template <class Args>
void run_kernel(const SlotTable& table, const Args& args) {
  if (table.slots.empty()) return;
  // The slot table by value on CUDA; kept with a graph capturing CPU work (engine/graph.h).
  const kernels::MultiTensorSlot* slots = graph_capture::kept(table.slots).data();
  CNN_KERNEL(table.device, optimizer_step, slots, static_cast<int>(table.slots.size()), table.total, args);
}
}  // namespace

void run_optimizer_kernel(const SlotTable& table, const kernels::SgdArgs& args) { run_kernel(table, args); }
void run_optimizer_kernel(const SlotTable& table, const kernels::AdamWArgs& args) { run_kernel(table, args); }

}  // namespace cnn::train
