// The memory of a captured graph (engine/graph.h), PyTorch's private graph pool. A graph replays
// its kernels with the addresses they had at capture, so every block allocated during the capture
// must stay the graph's for as long as the graph lives: no other tensor may be handed that memory
// in between, even after the tensor that held it during the capture is gone.
//
//   - Blocks come from the device's allocator (underneath) and go back to it only after the graph
//     is released, and only once no tensor holds them any more.
//   - A block freed during the capture may serve a later allocation of the same capture: the
//     replay runs the graph's work in the captured order on one stream, so the later use of the
//     memory comes after the earlier one, as it did when the graph was recorded.
//   - After the capture the pool hands out nothing; frees just mark blocks free for the release.
#pragma once
#include <cstddef>
#include <map>
#include <mutex>
#include <unordered_map>

#include "engine/allocator.h"

namespace cnn {

class GraphMemoryPool : public Allocator {
 public:
  explicit GraphMemoryPool(Allocator& underneath) : underneath_(underneath) {}
  ~GraphMemoryPool() override;  // gives every block back (the last tensor of the pool is gone)

  // During the capture: a free block of the pool that fits (at most twice the request and 4 KiB
  // more), else a new one from underneath. After end_capture: a cnn::Error (a pool serves one capture).
  void* allocate(size_t bytes) override;
  // A block of the pool: free for a later allocation of the capture; after release(), back to the
  // allocator underneath at once.
  void deallocate(void* ptr, size_t bytes) override;
  AllocatorStats stats() const override;  // the graph's blocks: in use, and held (reserved)
  void reset_peak() override;

  void end_capture();  // the capture is over: no more allocations
  void release();      // the graph is gone: free blocks go back now, the others when freed

 private:
  Allocator& underneath_;
  mutable std::mutex mutex_;
  bool capturing_ = true, released_ = false;
  std::multimap<size_t, void*> free_;         // size -> block, free for the capture
  std::unordered_map<void*, size_t> blocks_;  // every block the pool holds, with its size
  AllocatorStats stats_;
};

}  // namespace cnn
