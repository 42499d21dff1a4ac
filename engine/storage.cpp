#include "engine/storage.h"

#include "engine/allocator.h"
#include "engine/cuda_context.h"
#include "engine/graph.h"
#include "engine/graph_memory_pool.h"

namespace cnn {

Storage::Storage(size_t bytes, Device device, bool pinned) : bytes_(bytes), device_(device), pinned_(pinned) {
  if (device.is_cuda()) cuda::require_device(device.index);
  if (!pinned) graph_pool_ = graph_capture::pool_for(device);
  allocator_ = graph_pool_                ? graph_pool_.get()
               : device.is_cuda() ? &cuda_allocator(device.index)
               : pinned           ? &pinned_allocator()
                                  : &cpu_allocator();
  data_ = allocator_->allocate(bytes);
}

std::shared_ptr<Storage> Storage::borrow(void* data, size_t bytes, Device device) {
  std::shared_ptr<Storage> s(new Storage());
  s->data_ = data;
  s->bytes_ = bytes;
  s->device_ = device;
  return s;
}

void Storage::record_stream(void* stream) const {
  if (allocator_) allocator_->record_stream(data_, stream);
}

Storage::~Storage() {
  if (allocator_) allocator_->deallocate(data_, bytes_);
}

}  // namespace cnn
