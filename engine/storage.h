// Reference-counted memory that tensors view. Either owned (allocated from the device's allocator
// and returned to it when the last tensor goes) or borrowed (Tensor::from_blob: the caller owns it).
#pragma once
#include <cstddef>
#include <memory>

#include "engine/device.h"

namespace cnn {

class Allocator;

class Storage {
 public:
  // Allocates `bytes` on `device` (pinned host memory when pinned and the device is the CPU); during
  // a graph capture of `device` on this thread, from the graph's pool (engine/graph_memory_pool.h).
  Storage(size_t bytes, Device device, bool pinned = false);
  // Borrows memory the caller owns; it is never freed here.
  static std::shared_ptr<Storage> borrow(void* data, size_t bytes, Device device);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  Device device() const { return device_; }
  bool pinned() const { return pinned_; }
  void record_stream(void* stream) const;  // see Tensor::record_stream

 private:
  Storage() = default;
  void* data_ = nullptr;
  size_t bytes_ = 0;
  Device device_;
  bool pinned_ = false;
  Allocator* allocator_ = nullptr;  // null when borrowed
  std::shared_ptr<Allocator> graph_pool_;  // allocated during a graph capture: that graph's pool (engine/graph.h)
};

}  // namespace cnn
