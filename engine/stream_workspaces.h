// One scratch buffer per stream (cuBLAS's workspace), taken from an allocator on first use and kept
// for the life of the process. Safe to call from several threads: the allocator is called without
// any lock held here, since it takes locks of its own (the CUDA context's), and a thread that loses
// the race to create a stream's buffer gives its block back.
#pragma once
#include <cstddef>
#include <map>
#include <mutex>

#include "engine/allocator.h"

namespace cnn {

class StreamWorkspaces {
 public:
  explicit StreamWorkspaces(size_t bytes) : bytes_(bytes) {}
  StreamWorkspaces(const StreamWorkspaces&) = delete;
  StreamWorkspaces& operator=(const StreamWorkspaces&) = delete;

  // The buffer of `stream` (bytes() long), allocated from `allocator` the first time.
  void* get(void* stream, Allocator& allocator);
  size_t bytes() const { return bytes_; }
  size_t count() const;
  // Gives every buffer back to `allocator` (the one get() took them from). The CUDA context keeps
  // its workspaces for the life of the process; owners with a shorter life call this before they go.
  void release(Allocator& allocator);

 private:
  const size_t bytes_;
  mutable std::mutex mutex_;
  std::map<void*, void*> by_stream_;
};

}  // namespace cnn
