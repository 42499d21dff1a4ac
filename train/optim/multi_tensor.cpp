// Slot tables, their upload to the device, and the optimizer kernels over them.
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

const kernels::MultiTensorSlot* SlotTable::kernel_slots(Tensor& device_copy) const {
  if (device.is_cpu()) return slots.data();
  const size_t bytes = slots.size() * sizeof(kernels::MultiTensorSlot);
  device_copy = Tensor::empty({static_cast<int64_t>(bytes)}, DType::u8, device);
  cuda::copy(device_copy.data(), device, slots.data(), Device::cpu(), bytes);
  return static_cast<const kernels::MultiTensorSlot*>(device_copy.data());
}

namespace {
template <class Args>
void run_kernel(const SlotTable& table, const Args& args) {
  if (table.slots.empty()) return;
  Tensor device_copy;
  const kernels::MultiTensorSlot* slots = table.kernel_slots(device_copy);
  CNN_KERNEL(table.device, optimizer_step, slots, static_cast<int>(table.slots.size()), table.total, args);
}
}  // namespace

void run_optimizer_kernel(const SlotTable& table, const kernels::SgdArgs& args) { run_kernel(table, args); }
void run_optimizer_kernel(const SlotTable& table, const kernels::AdamWArgs& args) { run_kernel(table, args); }

}  // namespace cnn::train
