// Slot tables and their upload to the device.
#include "train/optim/multi_tensor.h"

#include "engine/backend.h"

namespace cnn::train {

kernels::MultiTensorSlot& SlotTable::add(int64_t numel) {
  kernels::MultiTensorSlot& s = slots.emplace_back();
  s.numel = numel;
  s.start = total;
  total += numel;
  return s;
}

void run_on_slots(const SlotTable& table, const std::function<void(const kernels::MultiTensorSlot*)>& on_cpu,
                  const std::function<void(const kernels::MultiTensorSlot*, kernels::Stream)>& on_cuda) {
  if (table.slots.empty()) return;
  run_on(table.device, [&] { on_cpu(table.slots.data()); },
         [&](kernels::Stream s) {
           const size_t bytes = table.slots.size() * sizeof(kernels::MultiTensorSlot);
           Tensor on_device = Tensor::empty({static_cast<int64_t>(bytes)}, DType::u8, table.device);
           cuda::copy(on_device.data(), table.device, table.slots.data(), Device::cpu(), bytes);
           on_cuda(static_cast<const kernels::MultiTensorSlot*>(on_device.data()), s);
         });
}

namespace {
template <class Args>
void run_kernel(const SlotTable& table, const Args& args) {
  const int count = static_cast<int>(table.slots.size());
  run_on_slots(
      table, [&](const kernels::MultiTensorSlot* slots) { kernels::cpu::optimizer_step(slots, count, table.total, args); },
      [&]([[maybe_unused]] const kernels::MultiTensorSlot* slots, kernels::Stream s) {
        CNN_IF_CUDA(kernels::cuda::optimizer_step(slots, count, table.total, args, s));
      });
}
}  // namespace

void run_optimizer_kernel(const SlotTable& table, const kernels::SgdArgs& args) { run_kernel(table, args); }
void run_optimizer_kernel(const SlotTable& table, const kernels::AdamWArgs& args) { run_kernel(table, args); }

}  // namespace cnn::train
