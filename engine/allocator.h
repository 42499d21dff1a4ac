// Memory for tensors. Every allocator keeps statistics (bytes in use, peak, reserved) so that tests
// and the trainer can see memory, on the CPU as well as on CUDA devices.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

namespace cnn {

struct AllocatorStats {
  size_t in_use = 0;           // bytes handed out and not yet returned
  size_t peak_in_use = 0;      // maximum of in_use since the last reset_peak()
  size_t reserved = 0;         // bytes obtained from the system (in use + cached)
  uint64_t allocations = 0;    // allocate() calls
  uint64_t system_allocations = 0;  // calls to the system allocator (malloc, cudaMalloc, ...)
};

class Allocator {
 public:
  virtual ~Allocator() = default;
  virtual void* allocate(size_t bytes) = 0;
  virtual void deallocate(void* ptr, size_t bytes) = 0;
  virtual AllocatorStats stats() const = 0;
  virtual void reset_peak() = 0;
  virtual void empty_cache() {}
};

// A caching allocator over a system allocator, for device memory: freed blocks go into pools by
// (stream, size class) and are handed out again to requests of the same class on the same stream,
// so a training loop that repeats its allocations stops calling the system allocator after its first
// step. Size classes: multiples of 512 bytes up to 1 MiB, multiples of 2 MiB above. A block is only
// reused on the stream it was last used on (work on one stream runs in order, so no event is needed).
// When the system allocator fails, the cache is released and the request tried once more.
class CachingAllocator : public Allocator {
 public:
  using SystemAlloc = std::function<void*(size_t)>;  // returns nullptr when out of memory
  using SystemFree = std::function<void(void*)>;
  using CurrentStream = std::function<void*()>;

  CachingAllocator(SystemAlloc system_alloc, SystemFree system_free, CurrentStream current_stream);
  ~CachingAllocator() override;

  void* allocate(size_t bytes) override;
  void deallocate(void* ptr, size_t bytes) override;
  AllocatorStats stats() const override;
  void reset_peak() override;
  void empty_cache() override;  // returns every cached block to the system

  static size_t size_class(size_t bytes);

 private:
  struct Block {
    size_t size;
    void* stream;
  };
  void release_cached_locked();

  SystemAlloc system_alloc_;
  SystemFree system_free_;
  CurrentStream current_stream_;
  mutable std::mutex mutex_;
  std::map<std::pair<void*, size_t>, std::vector<void*>> free_blocks_;  // (stream, size) -> blocks
  std::map<void*, Block> live_blocks_;
  AllocatorStats stats_;
};

// Host memory from a pair of system functions, with statistics (no caching).
class HostAllocator : public Allocator {
 public:
  using SystemAlloc = void* (*)(size_t);  // returns nullptr on failure
  using SystemFree = void (*)(void*);
  HostAllocator(SystemAlloc alloc, SystemFree free) : alloc_(alloc), free_(free) {}
  void* allocate(size_t bytes) override;
  void deallocate(void* ptr, size_t bytes) override;
  AllocatorStats stats() const override;
  void reset_peak() override;

 private:
  SystemAlloc alloc_;
  SystemFree free_;
  mutable std::mutex mutex_;
  AllocatorStats stats_;
};

// 64-byte aligned host memory, with statistics.
Allocator& cpu_allocator();
// Page-locked host memory for fast host-device copies (plain host memory without CUDA).
Allocator& pinned_allocator();
// The caching allocator of CUDA device `index` (a cnn::Error when there is no such device).
Allocator& cuda_allocator(int index);

}  // namespace cnn
