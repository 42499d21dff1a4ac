// Memory for tensors. Every allocator keeps statistics (bytes in use, peak, reserved) so that tests
// and the trainer can see memory, on the CPU as well as on CUDA devices.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <unordered_map>
#include <mutex>
#include <utility>
#include <vector>

#include "engine/byte_size.h"
#include "engine/error.h"

namespace cnn {

struct AllocatorStats {
  size_t in_use = 0;           // bytes handed out and not yet returned (rounded as allocated)
  size_t peak_in_use = 0;      // maximum of in_use since the last reset_peak()
  size_t reserved = 0;         // bytes obtained from the system (in use + cached)
  size_t peak_reserved = 0;    // maximum of reserved since the last reset_peak()
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
  // The block at `ptr` is (also) used by work queued on `stream`, another stream than the one it
  // was allocated on: once freed it is reused only after that work has run (PyTorch's
  // Tensor.record_stream). A no-op for allocators without streams.
  virtual void record_stream(void* /*ptr*/, void* /*stream*/) {}
  // A CUDA graph capture (engine/graph.h) begins or ends on the device: while one is under way the
  // allocator must not query or wait for events, nor give memory back to the system (both are
  // illegal during a capture). No-ops for allocators without a device.
  virtual void capture_begins() {}
  virtual void capture_ends() {}
  // The largest free block the allocator holds for the calling thread's stream: what it can hand
  // out without asking the system for memory (0 for allocators without a cache).
  virtual size_t largest_free_block() const { return 0; }
};

// Thrown when memory cannot be had even after the cache was given back; the message says how much
// was asked for, what is in use and reserved, and what to try.
class OutOfMemoryError : public Error {
 public:
  using Error::Error;
};

// Runs `call` (a kernel backed by cuBLAS or cuDNN). When the library could not allocate device
// memory of its own (LibraryOutOfMemory), the memory cached by the allocator that `allocator()`
// returns goes back to the system and `call` runs once more, as the allocator itself does for its
// own requests; a second failure is an OutOfMemoryError with the allocator's figures and what to try.
template <class GetAllocator, class Call>
void run_with_library_memory_retry(GetAllocator&& allocator, Call&& call) {
  try {
    call();
    return;
  } catch (const LibraryOutOfMemory&) {
    allocator().empty_cache();
  }
  try {
    call();
  } catch (const LibraryOutOfMemory& again) {
    const AllocatorStats stats = allocator().stats();
    throw OutOfMemoryError(detail::concat(
        again.what(), "; again after the engine's cache was given back (", format_bytes(double(stats.in_use)),
        " in use by tensors, ", format_bytes(double(stats.reserved)), " reserved). Try a smaller [data] batch_size, "
        "[precision] mode = bf16 or fp16, or [train] checkpointing = blocks"));
  }
}

// The system underneath a caching allocator: memory, the calling thread's stream, and events on
// streams. CUDA's device memory and pinned host memory in cuda_context.cpp, plain host memory in
// allocator.cpp; tests use fakes, so the policy runs without a GPU.
struct CachingSystem {
  std::function<void*(size_t)> alloc;      // returns nullptr when out of memory
  std::function<void(void*)> free;
  std::function<void*()> current_stream;   // the stream of the calling thread's work
  // An event marking the work queued on `stream` so far. Optional: a system without events (plain
  // host memory) has no other streams to wait for, and record_stream is a no-op there.
  std::function<void*(void* stream)> record_event;
  std::function<bool(void* event)> event_done;      // whether it has passed (never waits)
  std::function<void(void* event)> wait_event;      // the host waits for it
  std::function<void(void* event)> destroy_event;
  std::string name = "device";                      // for messages: "cuda:0"
  std::function<size_t()> free_memory;              // what the system still has, for messages (optional)
};

// A caching allocator over a system allocator, for device memory, on PyTorch's plan:
//   - Requests are rounded up to 512 bytes. Those of up to 1 MiB are carved out of 2 MiB segments
//     (the small pool); larger ones out of 20 MiB segments below 10 MiB, else out of a segment of
//     their own size rounded to 2 MiB (the large pool).
//   - A request takes the smallest free block of its pool and stream that fits (best fit) and splits
//     off the rest when the rest is worth keeping (>= 512 bytes small, > 1 MiB large). A freed block
//     merges with free neighbours of its segment, so eval shapes, a short last batch and cuDNN
//     workspaces share segments instead of each pinning blocks of their own size.
//   - `max_split_bytes` (PyTorch's max_split_size_mb): blocks larger than it are never split, and
//     smaller requests never take them, which limits fragmentation by huge one-off blocks.
//   - A block is reused only on the stream it was allocated on (work on one stream runs in order).
//     A block also used on other streams (record_stream) returns to the pool only after an event
//     recorded at free time on each of them has passed.
//   - When the system allocator fails, pending events are waited for, every whole free segment is
//     given back, and the request tried once more; then OutOfMemoryError. During a graph capture
//     neither can be done (nor are pending frees looked at): the request fails at once, and says so.
//   - Without caching (`caching = false`, CNN_NO_CUDA_MEMORY_CACHING=1, like PyTorch's
//     PYTORCH_NO_CUDA_MEMORY_CACHING) every request is a system allocation of exactly its size and
//     goes back to the system as soon as it is freed, or once the events of the other streams that
//     used it have passed (during a graph capture: when the capture has ended). Slow, but a memory
//     checker (compute-sanitizer) then sees an access past the end of a block, which inside a
//     cached segment is just other memory of the segment.
struct CachingAllocatorOptions {
  size_t max_split_bytes = SIZE_MAX;
  bool caching = true;
};

// The options the environment asks for, from the values of CNN_CUDA_MAX_SPLIT_MB (PyTorch's
// max_split_size_mb: a number of MiB, more than 20) and CNN_NO_CUDA_MEMORY_CACHING (1: no caching,
// 0: caching); nullptr for a variable that is not set. A value that is neither is a cnn::Error that
// names the variable.
CachingAllocatorOptions caching_options_from_environment(const char* max_split_mb, const char* no_caching);

class CachingAllocator : public Allocator {
 public:
  using Options = CachingAllocatorOptions;
  explicit CachingAllocator(CachingSystem system, Options options = {});
  ~CachingAllocator() override;

  void* allocate(size_t bytes) override;
  // Never throws (Storage's destructor calls it): a failure to record a stream's event keeps the
  // block out of use and is thrown by the next allocate instead.
  void deallocate(void* ptr, size_t bytes) noexcept override;
  AllocatorStats stats() const override;
  void reset_peak() override;
  // Waits for pending frees, then returns every whole free segment (a cnn::Error during a capture).
  void empty_cache() override;
  void record_stream(void* ptr, void* stream) override;
  void capture_begins() override;
  void capture_ends() override;
  size_t largest_free_block() const override;

  static constexpr size_t kMinBlock = 512;
  static constexpr size_t kSmallRequest = size_t{1} << 20;    // the small pool's largest request
  static constexpr size_t kSmallSegment = size_t{2} << 20;
  static constexpr size_t kMediumSegment = size_t{20} << 20;  // for requests of 1..10 MiB
  static constexpr size_t kLargeRequest = size_t{10} << 20;
  static size_t round_request(size_t bytes);
  static size_t segment_size(size_t rounded);
  // Blocks in the cache (free or waiting for other streams), and segments held, for tests.
  size_t cached_blocks() const;
  size_t segments() const;

 private:
  struct Block;
  struct BlockOrder {
    bool operator()(const Block* a, const Block* b) const;
  };
  using Pool = std::set<Block*, BlockOrder>;

  Block* find_free_locked(Pool& pool, void* stream, size_t size);
  Block* new_segment_locked(size_t bytes, size_t segment, void* stream, bool small_pool);
  Block* split_locked(Block* block, size_t size);
  void free_block_locked(Block* block);
  void process_pending_locked(bool wait);
  void release_cached_locked();
  void release_segment_locked(Block* block);
  void free_or_keep_locked(Block* block) noexcept;  // free_block_locked; a failure keeps it out of use
  void keep_out_of_use_locked(Block* block, const std::string& why);
  bool small(size_t size) const { return size <= kSmallRequest; }
  [[noreturn]] void fail_out_of_memory(size_t bytes, size_t segment) const;

  CachingSystem system_;
  Options options_;
  mutable std::mutex mutex_;
  Pool small_free_, large_free_;
  std::unordered_map<void*, Block*> live_blocks_;
  // (event, block) freed while other streams use it; without caching also (nullptr, block) for a
  // block freed during a graph capture, given back to the system once the capture has ended.
  std::vector<std::pair<void*, Block*>> pending_;
  std::string deferred_error_;  // a failure inside deallocate, thrown by the next allocate
  std::vector<Block*> abandoned_;  // blocks kept out of use for good (an event could not be recorded)
  size_t segment_count_ = 0;
  int captures_ = 0;  // graph captures under way on the device
  AllocatorStats stats_;
};

// Host memory from a pair of system functions, with statistics (no caching): the host memory of
// sanitizer builds, so that AddressSanitizer sees every free.
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

// Host memory taken from the system in whole multiples of this (the caching allocator's segments)
// is aligned to it and advised as transparent huge pages (madvise MADV_HUGEPAGE); every host block
// is at least 64-byte aligned.
inline constexpr size_t kHostHugePage = size_t{2} << 20;

// Host memory with statistics: cached blocks, aligned as above.
Allocator& cpu_allocator();
// Page-locked host memory for fast host-device copies: a CachingAllocator over cudaHostAlloc, as
// PyTorch's CachingHostAllocator, since cudaFreeHost waits for the whole device. A freed block is
// reused at once unless it was recorded on a stream (Tensor::record_stream after an asynchronous
// copy): then only after that stream's work at free time has run. Plain host memory without CUDA.
Allocator& pinned_allocator();
// The caching allocator of CUDA device `index` (a cnn::Error when there is no such device).
Allocator& cuda_allocator(int index);

}  // namespace cnn
