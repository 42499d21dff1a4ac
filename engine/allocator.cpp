#include "engine/allocator.h"

#include <algorithm>
#include <cstdlib>
#include <string>
#include <sys/mman.h>
#include <utility>

#include "engine/byte_size.h"
#include "engine/config.h"
#include "engine/error.h"

namespace cnn {

// ---- CachingAllocator ----

// A span of a segment: handed out (allocated), free in its pool, or waiting for other streams.
// Blocks of one segment form a list in address order (prev/next), so a freed block can merge.
struct CachingAllocator::Block {
  char* ptr = nullptr;
  size_t size = 0;
  void* stream = nullptr;        // the stream it was allocated on; reused only there
  bool allocated = false;
  bool small_pool = false;
  Block* prev = nullptr;
  Block* next = nullptr;
  std::vector<void*> other_streams;  // record_stream: streams besides `stream` that use it
  int events_pending = 0;            // events still to pass before it is free
};

bool CachingAllocator::BlockOrder::operator()(const Block* a, const Block* b) const {
  if (a->stream != b->stream) return std::less<void*>()(a->stream, b->stream);
  if (a->size != b->size) return a->size < b->size;
  return std::less<char*>()(a->ptr, b->ptr);
}

CachingAllocator::CachingAllocator(CachingSystem system, Options options)
    : system_(std::move(system)), options_(options) {
  // As in PyTorch: the limit must leave medium segments splittable.
  CNN_CHECK(options_.max_split_bytes > kMediumSegment, "the allocator's max split size (",
            format_bytes(double(options_.max_split_bytes)), ") must be larger than the 20 MiB of a medium segment");
}

CachingAllocatorOptions caching_options_from_environment(const char* max_split_mb, const char* no_caching) {
  CachingAllocatorOptions options;
  if (max_split_mb) {
    char* end = nullptr;
    const unsigned long long value = std::strtoull(max_split_mb, &end, 10);
    CNN_CHECK(end != max_split_mb && *end == '\0' && value > 0, "CNN_CUDA_MAX_SPLIT_MB=", max_split_mb,
              " is not a positive number of MiB; unset it or give e.g. 512 (more than 20)");
    options.max_split_bytes = static_cast<size_t>(value) << 20;
  }
  if (no_caching) {
    const std::string value = no_caching;
    CNN_CHECK(value == "0" || value == "1", "CNN_NO_CUDA_MEMORY_CACHING=", value,
              " is neither 1 (every block its own cudaMalloc, freed at once: for compute-sanitizer) nor 0 (the "
              "caching allocator); unset it or give one of those");
    options.caching = value == "0";
  }
  return options;
}

CachingAllocator::~CachingAllocator() {
  // Live blocks belong to tensors that outlive the allocator only at process exit; leave them.
  std::lock_guard<std::mutex> lock(mutex_);
  try {
    if (captures_ == 0) process_pending_locked(/*wait=*/true);
    release_cached_locked();
  } catch (...) {  // a destructor must not throw; a broken device fails loudly elsewhere
  }
  // What is left of segments still partly in use (or kept out of use after a failure): their memory
  // stays with the system until the process ends, their bookkeeping goes now.
  for (Pool* pool : {&small_free_, &large_free_}) {
    for (Block* block : *pool) delete block;
    pool->clear();
  }
  for (Block* block : abandoned_) delete block;
}

size_t CachingAllocator::round_request(size_t bytes) {
  if (bytes < kMinBlock) return kMinBlock;
  return (bytes + kMinBlock - 1) / kMinBlock * kMinBlock;
}

size_t CachingAllocator::segment_size(size_t rounded) {
  if (rounded <= kSmallRequest) return kSmallSegment;
  if (rounded < kLargeRequest) return kMediumSegment;
  return (rounded + kSmallSegment - 1) / kSmallSegment * kSmallSegment;
}

CachingAllocator::Block* CachingAllocator::find_free_locked(Pool& pool, void* stream, size_t size) {
  Block key;
  key.stream = stream;
  key.size = size;
  auto it = pool.lower_bound(&key);
  if (it == pool.end() || (*it)->stream != stream) return nullptr;
  Block* block = *it;
  // An unsplittable huge block serves only requests that are huge themselves, and not much smaller
  // than it (at most one medium segment of waste), as PyTorch does.
  if (block->size > options_.max_split_bytes &&
      (size <= options_.max_split_bytes || block->size - size >= kMediumSegment))
    return nullptr;
  pool.erase(it);
  return block;
}

CachingAllocator::Block* CachingAllocator::split_locked(Block* block, size_t size) {
  const size_t rest = block->size - size;
  const bool worth_keeping = block->small_pool ? rest >= kMinBlock : rest > kSmallRequest;
  if (!worth_keeping || block->size > options_.max_split_bytes) return block;
  auto* remainder = new Block;
  remainder->ptr = block->ptr + size;
  remainder->size = rest;
  remainder->stream = block->stream;
  remainder->small_pool = block->small_pool;
  remainder->prev = block;
  remainder->next = block->next;
  if (block->next) block->next->prev = remainder;
  block->next = remainder;
  block->size = size;
  (remainder->small_pool ? small_free_ : large_free_).insert(remainder);
  return block;
}

void* CachingAllocator::allocate(size_t bytes) {
  void* stream = system_.current_stream();
  std::lock_guard<std::mutex> lock(mutex_);
  if (!deferred_error_.empty()) throw Error(std::exchange(deferred_error_, {}));
  ++stats_.allocations;
  if (captures_ == 0) process_pending_locked(/*wait=*/false);
  Block* block = nullptr;
  if (options_.caching) {
    const size_t size = round_request(bytes);
    block = find_free_locked(small(size) ? small_free_ : large_free_, stream, size);
    if (!block) block = new_segment_locked(bytes, segment_size(size), stream, small(size));
    block = split_locked(block, size);
  } else {
    // A segment of exactly the request (a byte for an empty one), so that the memory checker knows
    // where the block ends.
    block = new_segment_locked(bytes, std::max<size_t>(bytes, 1), stream, /*small_pool=*/false);
  }
  block->allocated = true;
  live_blocks_[block->ptr] = block;
  stats_.in_use += block->size;
  stats_.peak_in_use = std::max(stats_.peak_in_use, stats_.in_use);
  return block->ptr;
}

CachingAllocator::Block* CachingAllocator::new_segment_locked(size_t bytes, size_t segment, void* stream,
                                                               bool small_pool) {
  void* ptr = system_.alloc(segment);
  if (!ptr && captures_ == 0) {  // out of memory: let pending frees land, give the cache back and try once more
    process_pending_locked(/*wait=*/true);
    release_cached_locked();
    ptr = system_.alloc(segment);
  }
  if (!ptr) fail_out_of_memory(bytes, segment);
  ++stats_.system_allocations;
  ++segment_count_;
  stats_.reserved += segment;
  stats_.peak_reserved = std::max(stats_.peak_reserved, stats_.reserved);
  auto* block = new Block;
  block->ptr = static_cast<char*>(ptr);
  block->size = segment;
  block->stream = stream;
  block->small_pool = small_pool;
  return block;
}

void CachingAllocator::fail_out_of_memory(size_t bytes, size_t segment) const {
  std::string free_text;
  if (system_.free_memory) free_text = ", " + format_bytes(double(system_.free_memory())) + " free on the device";
  throw OutOfMemoryError(detail::concat(
      "out of memory on ", system_.name, ": tried to allocate ", format_bytes(double(bytes)), " (a segment of ",
      format_bytes(double(segment)), "); ", format_bytes(double(stats_.in_use)), " in use by tensors, ",
      format_bytes(double(stats_.reserved)), " reserved by the cache", free_text,
      captures_ > 0 ? " (during a CUDA graph capture, where the cache cannot be given back)" : "", ". Try a smaller [data] batch_size, [precision] mode = bf16 or fp16, or [train] checkpointing = blocks"));
}

void CachingAllocator::capture_begins() {
  std::lock_guard<std::mutex> lock(mutex_);
  ++captures_;
}

void CachingAllocator::capture_ends() {
  std::lock_guard<std::mutex> lock(mutex_);
  --captures_;
}

void CachingAllocator::deallocate(void* ptr, size_t) noexcept {
  if (!ptr) return;
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = live_blocks_.find(ptr);
  if (it == live_blocks_.end()) return;  // not ours (cannot happen through Storage)
  Block* block = it->second;
  live_blocks_.erase(it);
  stats_.in_use -= block->size;
  block->allocated = false;
  if (block->other_streams.empty()) {
    free_or_keep_locked(block);
    return;
  }
  for (void* other : block->other_streams) {
    // Counted first: if the event cannot be recorded, the count never returns to 0 and the block is
    // never reused (nothing says the other stream is done with it). deallocate runs in Storage's
    // destructor, where a throw would end the process: the error waits for the next allocate.
    ++block->events_pending;
    try {
      pending_.emplace_back(system_.record_event(other), block);
    } catch (const std::exception& e) {
      keep_out_of_use_locked(block, detail::concat("freeing ", format_bytes(double(block->size)), " on ", system_.name,
                                                   " failed to record an event on a stream that used the memory: ",
                                                   e.what()));
    }
  }
  block->other_streams.clear();
}

void CachingAllocator::free_or_keep_locked(Block* block) noexcept {
  try {
    free_block_locked(block);
  } catch (const std::exception& e) {  // without caching, the system's free failed
    keep_out_of_use_locked(block, detail::concat("giving ", format_bytes(double(block->size)), " back to ",
                                                 system_.name, " failed: ", e.what()));
  }
}

void CachingAllocator::keep_out_of_use_locked(Block* block, const std::string& why) {
  if (abandoned_.empty() || abandoned_.back() != block) abandoned_.push_back(block);
  if (deferred_error_.empty()) deferred_error_ = why + "; the memory is kept out of use";
}

void CachingAllocator::record_stream(void* ptr, void* stream) {
  if (!system_.record_event) return;  // no streams but the one: nothing to wait for
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = live_blocks_.find(ptr);
  CNN_CHECK(it != live_blocks_.end(), "record_stream: ", ptr, " is not a live block of ", system_.name, "'s allocator");
  Block* block = it->second;
  if (stream == block->stream) return;
  if (std::find(block->other_streams.begin(), block->other_streams.end(), stream) == block->other_streams.end())
    block->other_streams.push_back(stream);
}

void CachingAllocator::free_block_locked(Block* block) {
  if (!options_.caching) {
    if (captures_ > 0) {  // the system's free (cudaFree) must not run during a capture: after it
      ++block->events_pending;
      pending_.emplace_back(nullptr, block);
    } else {
      release_segment_locked(block);
    }
    return;
  }
  Pool& pool = block->small_pool ? small_free_ : large_free_;
  auto free_neighbour = [](Block* b) { return b && !b->allocated && b->events_pending == 0; };
  auto merge = [](Block* left, Block* right) {  // right joins left; right is deleted
    left->size += right->size;
    left->next = right->next;
    if (right->next) right->next->prev = left;
    delete right;
  };
  if (free_neighbour(block->prev)) {
    Block* prev = block->prev;
    pool.erase(prev);
    merge(prev, block);
    block = prev;
  }
  if (free_neighbour(block->next)) {
    pool.erase(block->next);
    merge(block, block->next);
  }
  pool.insert(block);
}

void CachingAllocator::process_pending_locked(bool wait) {
  // Never during a capture (the callers see to it), so a block freed here without caching goes back
  // to the system at once instead of joining pending_ while it is walked.
  std::erase_if(pending_, [&](const std::pair<void*, Block*>& entry) {
    if (void* event = entry.first) {  // null: waiting only for the capture to end, which it has
      if (wait) system_.wait_event(event);
      else if (!system_.event_done(event)) return false;
      system_.destroy_event(event);
    }
    if (--entry.second->events_pending == 0) free_or_keep_locked(entry.second);
    return true;
  });
}

size_t CachingAllocator::largest_free_block() const {
  void* stream = system_.current_stream();
  std::lock_guard<std::mutex> lock(mutex_);
  size_t largest = 0;
  for (const Pool* pool : {&small_free_, &large_free_})
    for (const Block* block : *pool)
      if (block->stream == stream) largest = std::max(largest, block->size);
  return largest;
}

AllocatorStats CachingAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

void CachingAllocator::reset_peak() {
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.peak_in_use = stats_.in_use;
  stats_.peak_reserved = stats_.reserved;
}

void CachingAllocator::empty_cache() {
  std::lock_guard<std::mutex> lock(mutex_);
  CNN_CHECK(captures_ == 0, "empty_cache on ", system_.name, " during a CUDA graph capture: giving memory back to the "
            "system (cudaFree) cannot be captured; empty the cache before or after the capture");
  process_pending_locked(/*wait=*/true);
  release_cached_locked();
}

size_t CachingAllocator::cached_blocks() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return small_free_.size() + large_free_.size() + pending_.size();
}

size_t CachingAllocator::segments() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return segment_count_;
}

void CachingAllocator::release_cached_locked() {
  // Only whole segments go back: a free block with no neighbours is a segment nothing uses.
  for (Pool* pool : {&small_free_, &large_free_}) {
    for (auto it = pool->begin(); it != pool->end();) {
      Block* block = *it;
      if (block->prev || block->next) {
        ++it;
        continue;
      }
      release_segment_locked(block);
      it = pool->erase(it);
    }
  }
}

void CachingAllocator::release_segment_locked(Block* block) {
  system_.free(block->ptr);  // when this throws, the segment stays counted: the system may still hold it
  stats_.reserved -= block->size;
  --segment_count_;
  delete block;
}

// ---- host allocators ----

void* HostAllocator::allocate(size_t bytes) {
  void* p = alloc_(bytes);
  if (p == nullptr)
    throw OutOfMemoryError(detail::concat("out of host memory allocating ", format_bytes(double(bytes)), " (",
                                          format_bytes(double(stats().in_use)),
                                          " in use); reduce the batch size or the number of loader workers"));
  std::lock_guard<std::mutex> lock(mutex_);
  ++stats_.allocations;
  ++stats_.system_allocations;
  stats_.in_use += bytes;
  stats_.reserved += bytes;
  stats_.peak_in_use = std::max(stats_.peak_in_use, stats_.in_use);
  stats_.peak_reserved = std::max(stats_.peak_reserved, stats_.reserved);
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
  stats_.peak_reserved = stats_.reserved;
}

namespace {
// Host blocks: 64-byte aligned (a cache line, and an AVX-512 vector). The caching allocator's
// segments are whole multiples of 2 MiB; those are aligned to 2 MiB and marked for transparent huge
// pages, so that the passes over a step's activations (tens of MiB each) take one TLB entry per
// 2 MiB instead of one per 4 KiB: ResNet-50's and compact_cnn's CPU training steps ran 2-4% faster.
// Where the system does not offer huge pages (transparent_hugepage = never) the advice changes
// nothing.
void* aligned_host_alloc(size_t bytes) {
  if (bytes >= kHostHugePage && bytes % kHostHugePage == 0) {
    void* p = std::aligned_alloc(kHostHugePage, bytes);
    if (p) madvise(p, bytes, MADV_HUGEPAGE);  // advice only: its failure leaves 4 KiB pages
    return p;
  }
  const size_t rounded = (bytes + 63) / 64 * 64;
  return std::aligned_alloc(64, rounded == 0 ? 64 : rounded);
}
void aligned_host_free(void* p) { std::free(p); }
}  // namespace

// Host tensors come from the same caching allocator as device memory (its one "stream" is null): a
// training step's activations then reuse the last step's blocks instead of each large buffer being
// mapped, page-faulted and zeroed by the kernel again (a fifth of a CPU step's time went there).
// Never destroyed, so that tensors in other static objects may outlive it. Sanitizer builds keep
// malloc and free, so that every use after free is seen.
Allocator& cpu_allocator() {
#if CNN_SANITIZED
  static HostAllocator allocator(aligned_host_alloc, aligned_host_free);
  return allocator;
#else
  static CachingAllocator* allocator = [] {
    CachingSystem system;
    system.alloc = aligned_host_alloc;
    system.free = aligned_host_free;
    system.current_stream = []() -> void* { return nullptr; };
    system.name = "cpu";
    return new CachingAllocator(std::move(system));
  }();
  return *allocator;
#endif
}

}  // namespace cnn
