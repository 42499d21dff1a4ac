// The graph memory pool (see graph_memory_pool.h).
#include "engine/graph_memory_pool.h"

#include <algorithm>

#include "engine/error.h"

namespace cnn {

GraphMemoryPool::~GraphMemoryPool() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& [ptr, size] : blocks_) underneath_.deallocate(ptr, size);
}

void* GraphMemoryPool::allocate(size_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  CNN_CHECK(capturing_, "a graph's memory pool allocates only during its capture");
  ++stats_.allocations;
  void* ptr = nullptr;
  size_t size = bytes;
  const auto fit = free_.lower_bound(bytes);
  if (fit != free_.end() && fit->first <= 2 * bytes + 4096) {
    size = fit->first;
    ptr = fit->second;
    free_.erase(fit);
  } else {
    ptr = underneath_.allocate(bytes);
    blocks_.emplace(ptr, bytes);
    ++stats_.system_allocations;
    stats_.reserved += bytes;
    stats_.peak_reserved = std::max(stats_.peak_reserved, stats_.reserved);
  }
  stats_.in_use += size;
  stats_.peak_in_use = std::max(stats_.peak_in_use, stats_.in_use);
  return ptr;
}

void GraphMemoryPool::deallocate(void* ptr, size_t) {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto block = blocks_.find(ptr);
  if (block == blocks_.end()) return;  // not the pool's (cannot happen: storages free where they allocated)
  const size_t size = block->second;
  stats_.in_use -= size;
  if (released_) {
    underneath_.deallocate(ptr, size);
    blocks_.erase(block);
    stats_.reserved -= size;
  } else {
    free_.emplace(size, ptr);
  }
}

AllocatorStats GraphMemoryPool::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

void GraphMemoryPool::reset_peak() {
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.peak_in_use = stats_.in_use;
  stats_.peak_reserved = stats_.reserved;
}

void GraphMemoryPool::end_capture() {
  std::lock_guard<std::mutex> lock(mutex_);
  capturing_ = false;
}

void GraphMemoryPool::release() {
  std::lock_guard<std::mutex> lock(mutex_);
  capturing_ = false;
  released_ = true;
  for (const auto& [size, ptr] : free_) {
    underneath_.deallocate(ptr, size);
    blocks_.erase(ptr);
    stats_.reserved -= size;
  }
  free_.clear();
}

}  // namespace cnn
