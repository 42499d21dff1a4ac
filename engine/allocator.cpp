#include "engine/allocator.h"

#include <cstdlib>

#include "engine/error.h"

namespace cnn {

// ---- CachingAllocator ----

CachingAllocator::CachingAllocator(SystemAlloc system_alloc, SystemFree system_free, CurrentStream current_stream)
    : system_alloc_(std::move(system_alloc)),
      system_free_(std::move(system_free)),
      current_stream_(std::move(current_stream)) {}

CachingAllocator::~CachingAllocator() {
  // Live blocks belong to tensors that outlive the allocator only at process exit; leave them.
  std::lock_guard<std::mutex> lock(mutex_);
  release_cached_locked();
}

size_t CachingAllocator::size_class(size_t bytes) {
  constexpr size_t kSmallStep = 512, kSmallLimit = size_t(1) << 20, kLargeStep = size_t(2) << 20;
  if (bytes == 0) bytes = 1;
  if (bytes <= kSmallLimit) return (bytes + kSmallStep - 1) / kSmallStep * kSmallStep;
  return (bytes + kLargeStep - 1) / kLargeStep * kLargeStep;
}

void* CachingAllocator::allocate(size_t bytes) {
  const size_t size = size_class(bytes);
  void* stream = current_stream_();
  std::lock_guard<std::mutex> lock(mutex_);
  ++stats_.allocations;
  void* ptr = nullptr;
  auto pool = free_blocks_.find({stream, size});
  if (pool != free_blocks_.end() && !pool->second.empty()) {
    ptr = pool->second.back();
    pool->second.pop_back();
  } else {
    ptr = system_alloc_(size);
    if (!ptr) {  // out of memory: give the cache back and try once more
      release_cached_locked();
      ptr = system_alloc_(size);
    }
    CNN_CHECK(ptr, "out of device memory allocating ", bytes, " bytes (", stats_.in_use, " bytes in use, ",
              stats_.reserved, " reserved); reduce the batch size or enable gradient checkpointing");
    ++stats_.system_allocations;
    stats_.reserved += size;
  }
  live_blocks_[ptr] = Block{size, stream};
  stats_.in_use += size;
  if (stats_.in_use > stats_.peak_in_use) stats_.peak_in_use = stats_.in_use;
  return ptr;
}

void CachingAllocator::deallocate(void* ptr, size_t) {
  if (!ptr) return;
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = live_blocks_.find(ptr);
  if (it == live_blocks_.end()) return;  // not ours (cannot happen through Storage)
  const Block block = it->second;
  live_blocks_.erase(it);
  stats_.in_use -= block.size;
  free_blocks_[{block.stream, block.size}].push_back(ptr);
}

AllocatorStats CachingAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

void CachingAllocator::reset_peak() {
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.peak_in_use = stats_.in_use;
}

void CachingAllocator::empty_cache() {
  std::lock_guard<std::mutex> lock(mutex_);
  release_cached_locked();
}

void CachingAllocator::release_cached_locked() {
  for (auto& [key, blocks] : free_blocks_) {
    for (void* p : blocks) {
      system_free_(p);
      stats_.reserved -= key.second;
    }
  }
  free_blocks_.clear();
}

// ---- host allocators ----

void* HostAllocator::allocate(size_t bytes) {
  void* p = alloc_(bytes);
  CNN_CHECK(p != nullptr, "out of host memory allocating ", bytes, " bytes (", stats().in_use,
            " bytes in use); reduce the batch size or the number of loader workers");
  std::lock_guard<std::mutex> lock(mutex_);
  ++stats_.allocations;
  ++stats_.system_allocations;
  stats_.in_use += bytes;
  stats_.reserved += bytes;
  if (stats_.in_use > stats_.peak_in_use) stats_.peak_in_use = stats_.in_use;
  return p;
}

void HostAllocator::deallocate(void* ptr, size_t bytes) {
  if (!ptr) return;
  free_(ptr);
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.in_use -= bytes;
  stats_.reserved -= bytes;
}

AllocatorStats HostAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

void HostAllocator::reset_peak() {
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.peak_in_use = stats_.in_use;
}

namespace {
void* aligned_host_alloc(size_t bytes) {
  const size_t rounded = (bytes + 63) / 64 * 64;
  return std::aligned_alloc(64, rounded == 0 ? 64 : rounded);
}
void aligned_host_free(void* p) { std::free(p); }
}  // namespace

Allocator& cpu_allocator() {
  static HostAllocator allocator(aligned_host_alloc, aligned_host_free);
  return allocator;
}

}  // namespace cnn
