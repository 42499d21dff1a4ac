#include "engine/stream_workspaces.h"

namespace cnn {

void* StreamWorkspaces::get(void* stream, Allocator& allocator) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = by_stream_.find(stream);
    if (it != by_stream_.end()) return it->second;
  }
  void* block = allocator.allocate(bytes_);  // no lock held: the allocator may lock what our caller holds
  void* kept = nullptr;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    kept = by_stream_.emplace(stream, block).first->second;
  }
  if (kept != block) allocator.deallocate(block, bytes_);  // another thread was first
  return kept;
}

size_t StreamWorkspaces::count() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return by_stream_.size();
}

void StreamWorkspaces::release(Allocator& allocator) {
  std::map<void*, void*> taken;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    taken.swap(by_stream_);
  }
  for (const auto& [stream, block] : taken) allocator.deallocate(block, bytes_);  // no lock held, as in get()
}

}  // namespace cnn
