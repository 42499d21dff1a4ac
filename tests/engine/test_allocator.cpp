// The caching allocator's policy, driven by a fake system allocator so that it runs without a GPU,
// and the host allocator's statistics.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <future>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "engine/cnn.h"
#include "engine/config.h"
#include "engine/stream_workspaces.h"

using namespace cnn;

namespace {
constexpr size_t KiB = 1024, MiB = 1024 * 1024;

// A fake system under the caching allocator: malloc'd memory with an optional limit, and events
// that pass only when the test says so (or when the allocator waits for them).
struct FakeSystem {
  int mallocs = 0, frees = 0, waits = 0;
  size_t limit = SIZE_MAX, held = 0;
  void* stream = nullptr;
  std::map<void*, size_t> live;
  struct Event {
    bool done = false;
  };
  std::vector<std::unique_ptr<Event>> events;
  int destroyed_events = 0;
  bool fail_events = false;  // recording an event throws, as on a device that has failed
  bool has_events = true;    // false: a system without events (plain host memory)
  std::vector<void*> event_streams;  // the stream of each event recorded

  CachingAllocator make(CachingAllocator::Options options = {}) {
    CachingSystem system;
    system.alloc = [this](size_t bytes) -> void* {
      if (held + bytes > limit) return nullptr;
      ++mallocs;
      void* p = std::malloc(bytes);
      live[p] = bytes;
      held += bytes;
      return p;
    };
    system.free = [this](void* p) {
      ++frees;
      held -= live.at(p);
      live.erase(p);
      std::free(p);
    };
    system.current_stream = [this] { return stream; };
    if (has_events)
      system.record_event = [this](void* on) -> void* {
        if (fail_events) throw Error("device lost");
        events.push_back(std::make_unique<Event>());
        event_streams.push_back(on);
        return events.back().get();
      };
    system.event_done = [](void* e) { return static_cast<Event*>(e)->done; };
    system.wait_event = [this](void* e) {
      ++waits;
      static_cast<Event*>(e)->done = true;
    };
    system.destroy_event = [this](void*) { ++destroyed_events; };
    system.name = "fake:0";
    system.free_memory = [this] { return limit == SIZE_MAX ? size_t{0} : limit - held; };
    return CachingAllocator(std::move(system), options);
  }
};
}  // namespace

TEST_CASE("requests round to 512 bytes, small ones share 2 MiB segments, large ones 20 MiB or their own") {
  CHECK(CachingAllocator::round_request(0) == 512);
  CHECK(CachingAllocator::round_request(1) == 512);
  CHECK(CachingAllocator::round_request(513) == 1024);
  CHECK(CachingAllocator::round_request(1 * MiB) == 1 * MiB);
  CHECK(CachingAllocator::segment_size(512) == 2 * MiB);
  CHECK(CachingAllocator::segment_size(1 * MiB) == 2 * MiB);
  CHECK(CachingAllocator::segment_size(1 * MiB + 512) == 20 * MiB);
  CHECK(CachingAllocator::segment_size(9 * MiB) == 20 * MiB);
  CHECK(CachingAllocator::segment_size(10 * MiB) == 10 * MiB);
  CHECK(CachingAllocator::segment_size(33 * MiB + 1) == 34 * MiB);
}

TEST_CASE("a repeated allocation pattern stops calling the system allocator") {
  FakeSystem sys;
  {
    CachingAllocator alloc = sys.make();
    auto step = [&] {
      void* a = alloc.allocate(1000);
      void* b = alloc.allocate(3 * MiB);
      void* c = alloc.allocate(1000);
      alloc.deallocate(a, 1000);
      alloc.deallocate(b, 3 * MiB);
      alloc.deallocate(c, 1000);
    };
    step();
    CHECK(sys.mallocs == 2);  // one small segment for a and c, one 20 MiB segment for b
    for (int i = 0; i < 10; ++i) step();
    CHECK(sys.mallocs == 2);  // steady state: no system calls
    AllocatorStats s = alloc.stats();
    CHECK(s.in_use == 0);
    CHECK(s.peak_in_use == 1024 + 3 * MiB + 1024);
    CHECK(s.reserved == 2 * MiB + 20 * MiB);
    CHECK(s.peak_reserved == 2 * MiB + 20 * MiB);
    CHECK(s.allocations == 33);
    CHECK(s.system_allocations == 2);
    alloc.empty_cache();
    CHECK(alloc.stats().reserved == 0);
    CHECK(sys.live.empty());
  }
}

TEST_CASE("a freed block is reused only on the stream it was allocated on") {
  FakeSystem sys;
  CachingAllocator alloc = sys.make();
  int stream_a = 0, stream_b = 0;
  sys.stream = &stream_a;
  void* p = alloc.allocate(4096);
  alloc.deallocate(p, 4096);
  sys.stream = &stream_b;
  void* q = alloc.allocate(4096);
  CHECK(q != p);
  CHECK(sys.mallocs == 2);
  sys.stream = &stream_a;
  void* r = alloc.allocate(4096);
  CHECK(r == p);
  alloc.deallocate(q, 4096);
  alloc.deallocate(r, 4096);
}

TEST_CASE("blocks split and merge, so other shapes reuse the same segment") {
  FakeSystem sys;
  CachingAllocator alloc = sys.make();
  SUBCASE("small pool: four quarter blocks freed make room for one block of their total") {
    std::vector<void*> quarters;
    for (int i = 0; i < 4; ++i) quarters.push_back(alloc.allocate(256 * KiB));
    CHECK(sys.mallocs == 1);
    CHECK(static_cast<char*>(quarters[1]) == static_cast<char*>(quarters[0]) + 256 * KiB);  // carved in order
    // Free out of order: the middle ones merge with each neighbour as it comes back.
    for (int i : {1, 3, 0, 2}) alloc.deallocate(quarters[i], 256 * KiB);
    CHECK(alloc.cached_blocks() == 1);  // one free block: the whole segment
    void* whole = alloc.allocate(1 * MiB);
    CHECK(whole == quarters[0]);
    CHECK(sys.mallocs == 1);
    alloc.deallocate(whole, 1 * MiB);
  }
  SUBCASE("large pool: an eval-sized request takes part of a training-sized block") {
    void* train = alloc.allocate(12 * MiB);  // a segment of its own
    alloc.deallocate(train, 12 * MiB);
    void* eval = alloc.allocate(8 * MiB);    // best fit: the 12 MiB block, split
    void* rest = alloc.allocate(4 * MiB);    // the remainder
    CHECK(eval == train);
    CHECK(static_cast<char*>(rest) == static_cast<char*>(train) + 8 * MiB);
    CHECK(sys.mallocs == 1);
    CHECK(alloc.stats().in_use == 12 * MiB);
    alloc.deallocate(eval, 8 * MiB);
    alloc.deallocate(rest, 4 * MiB);
    void* again = alloc.allocate(12 * MiB);  // merged back into one
    CHECK(again == train);
    CHECK(sys.mallocs == 1);
    alloc.deallocate(again, 12 * MiB);
  }
  SUBCASE("a remainder too small to keep stays with the block") {
    void* a = alloc.allocate(12 * MiB);
    alloc.deallocate(a, 12 * MiB);
    void* b = alloc.allocate(11 * MiB + 512 * KiB);  // 512 KiB left: not worth a large block
    CHECK(b == a);
    CHECK(alloc.stats().in_use == 12 * MiB);
    alloc.deallocate(b, 0);
  }
  SUBCASE("best fit: the smallest free block that fits") {
    void* big = alloc.allocate(30 * MiB);
    void* small = alloc.allocate(12 * MiB);
    alloc.deallocate(big, 0);
    alloc.deallocate(small, 0);
    void* fit = alloc.allocate(11 * MiB);
    CHECK(fit == small);
    alloc.deallocate(fit, 0);
  }
  SUBCASE("empty_cache gives back only segments nothing uses") {
    void* a = alloc.allocate(1000);
    void* b = alloc.allocate(1000);  // same segment as a
    void* c = alloc.allocate(16 * MiB);
    alloc.deallocate(a, 1000);
    alloc.deallocate(c, 16 * MiB);
    alloc.empty_cache();
    CHECK(sys.frees == 1);  // c's segment; a's is still b's
    CHECK(alloc.stats().reserved == 2 * MiB);
    CHECK(alloc.segments() == 1);
    alloc.deallocate(b, 1000);
    alloc.empty_cache();
    CHECK(sys.live.empty());
  }
}

TEST_CASE("max_split_bytes: huge blocks are not split and serve only requests close to their size") {
  FakeSystem sys;
  CachingAllocator alloc = sys.make({.max_split_bytes = 32 * MiB});
  void* huge = alloc.allocate(80 * MiB);
  alloc.deallocate(huge, 0);
  void* medium = alloc.allocate(8 * MiB);  // below the limit: never from a huge block
  CHECK(medium != huge);
  CHECK(sys.mallocs == 2);
  void* large = alloc.allocate(70 * MiB);  // above the limit, within 20 MiB of the block: the whole block
  CHECK(large == huge);
  CHECK(alloc.stats().in_use == 80 * MiB + 8 * MiB);
  alloc.deallocate(large, 0);
  void* much_smaller = alloc.allocate(40 * MiB);  // above the limit but 40 MiB smaller: a segment of its own
  CHECK(much_smaller != huge);
  CHECK(sys.mallocs == 3);
  alloc.deallocate(medium, 0);
  alloc.deallocate(much_smaller, 0);
  CHECK_THROWS_WITH_AS(sys.make({.max_split_bytes = 16 * MiB}), doctest::Contains("larger than the 20 MiB"), Error);
}

TEST_CASE("record_stream: a block used on another stream is reused only after that stream's work") {
  FakeSystem sys;
  CachingAllocator alloc = sys.make();
  int compute = 0, communication = 0;
  sys.stream = &compute;
  void* p = alloc.allocate(64 * KiB);
  alloc.record_stream(p, &communication);
  alloc.record_stream(p, &communication);  // once is enough
  alloc.record_stream(p, &compute);        // its own stream: nothing to wait for
  alloc.deallocate(p, 64 * KiB);
  REQUIRE(sys.events.size() == 1);         // one event, on the communication stream
  void* q = alloc.allocate(64 * KiB);
  CHECK(q != p);                           // the collective may still read p
  sys.events[0]->done = true;
  alloc.deallocate(q, 64 * KiB);
  void* r = alloc.allocate(64 * KiB);      // q's place, merged back with p's now that p is free
  CHECK(r == p);
  CHECK(sys.destroyed_events == 1);
  CHECK(sys.mallocs == 1);
  alloc.deallocate(r, 0);

  SUBCASE("empty_cache waits for the pending events and returns the memory") {
    void* s = alloc.allocate(64 * KiB);
    alloc.record_stream(s, &communication);
    alloc.deallocate(s, 0);
    CHECK(alloc.cached_blocks() == 2);  // the pending block and the rest of its segment
    alloc.empty_cache();
    CHECK(sys.waits == 1);
    CHECK(sys.live.empty());
  }
  SUBCASE("a block never recorded is not waited for") {
    void* s = alloc.allocate(64 * KiB);
    alloc.deallocate(s, 0);
    alloc.empty_cache();
    CHECK(sys.waits == 0);
  }
  CHECK_THROWS_WITH_AS(alloc.record_stream(&compute, &communication), doctest::Contains("not a live block of fake:0"),
                       Error);
}

TEST_CASE("record_stream: an event that cannot be recorded at free time keeps the block out of use and fails the next allocate") {
  // Before, the exception left deallocate, which Storage's destructor calls: std::terminate.
  FakeSystem sys;
  {
    CachingAllocator alloc = sys.make();
    int compute = 0, communication = 0;
    sys.stream = &compute;
    void* p = alloc.allocate(64 * KiB);
    alloc.record_stream(p, &communication);
    sys.fail_events = true;
    CHECK_NOTHROW(alloc.deallocate(p, 64 * KiB));
    CHECK_THROWS_WITH_AS(alloc.allocate(64 * KiB),
                         doctest::Contains("freeing 64.0 KiB on fake:0 failed to record an event on a stream that used the "
                                           "memory: device lost; the memory is kept out of use"),
                         Error);
    sys.fail_events = false;
    void* q = alloc.allocate(64 * KiB);  // the error was reported once; p's block stays out of use
    CHECK(q != p);
    alloc.deallocate(q, 0);
  }
  CHECK(sys.live.size() == 1);  // the allocator kept p's segment to the end: give it back here
  for (const auto& [ptr, bytes] : sys.live) std::free(ptr);
}

TEST_CASE("out of memory: the cache is given back and the request retried, else a message with the figures") {
  FakeSystem sys;
  sys.limit = 64 * MiB;
  CachingAllocator alloc = sys.make();
  void* a = alloc.allocate(40 * MiB);
  alloc.deallocate(a, 0);
  void* b = alloc.allocate(30 * MiB);  // from the cached block, split, and merged back when freed
  CHECK(b == a);
  alloc.deallocate(b, 0);
  void* c = alloc.allocate(50 * MiB);  // 40 cached + 50 is over the limit: the cache goes back first
  CHECK(sys.frees == 1);
  CHECK(alloc.stats().reserved == 50 * MiB);
  try {
    (void)alloc.allocate(20 * MiB);
    FAIL("expected an OutOfMemoryError");
  } catch (const OutOfMemoryError& e) {
    const std::string message = e.what();
    CHECK(message.find("out of memory on fake:0: tried to allocate 20.0 MiB") != std::string::npos);
    CHECK(message.find("50.0 MiB in use by tensors, 50.0 MiB reserved by the cache, 14.0 MiB free") !=
          std::string::npos);
    CHECK(message.find("batch_size") != std::string::npos);
    CHECK(message.find("checkpointing = blocks") != std::string::npos);
  }
  alloc.deallocate(c, 0);
}

TEST_CASE("during a graph capture: no event is looked at, no memory goes back, and out of memory says why") {
  // cudaEventQuery and cudaFree are illegal while CUDA captures a graph.
  FakeSystem sys;
  sys.limit = 64 * MiB;
  CachingAllocator alloc = sys.make();
  int compute = 0, communication = 0;
  sys.stream = &compute;
  void* p = alloc.allocate(64 * KiB);
  alloc.record_stream(p, &communication);
  alloc.deallocate(p, 0);
  void* cached = alloc.allocate(40 * MiB);
  alloc.deallocate(cached, 0);
  sys.events[0]->done = true;  // its work has run, but the capture must not ask

  alloc.capture_begins();
  void* q = alloc.allocate(64 * KiB);
  CHECK(q != p);                        // the pending block was not looked at
  CHECK(sys.destroyed_events == 0);
  CHECK_THROWS_WITH_AS(alloc.empty_cache(), doctest::Contains("during a CUDA graph capture"), Error);
  // Outside a capture the cached 40 MiB would go back to make room for 50 MiB; here it cannot.
  CHECK_THROWS_WITH_AS((void)alloc.allocate(50 * MiB), doctest::Contains("during a CUDA graph capture"), OutOfMemoryError);
  CHECK(sys.frees == 0);  // the cache was not given back
  alloc.capture_ends();

  void* r = alloc.allocate(64 * KiB);  // now the pending block is seen to be free
  CHECK(sys.destroyed_events == 1);
  void* big = alloc.allocate(50 * MiB);  // and the cache can be given back
  CHECK(sys.frees == 1);
  for (void* block : {r, q, big}) alloc.deallocate(block, 0);
}

TEST_CASE("a library that cannot allocate memory of its own gets a second try after the cache is given back") {
  FakeSystem sys;
  CachingAllocator alloc = sys.make();
  void* cached = alloc.allocate(40 * MiB);
  alloc.deallocate(cached, 0);
  const auto allocator = [&]() -> Allocator& { return alloc; };
  int calls = 0;
  SUBCASE("the second try succeeds") {
    run_with_library_memory_retry(allocator, [&] {
      if (++calls == 1) throw LibraryOutOfMemory("cuDNN cudnnConvolutionForward failed: device allocation");
    });
    CHECK(calls == 2);
    CHECK(sys.frees == 1);  // the cached 40 MiB went back first
  }
  SUBCASE("a second failure is out of memory, with the figures") {
    try {
      run_with_library_memory_retry(allocator, [&] {
        ++calls;
        throw LibraryOutOfMemory("cuBLAS cublasGemmEx failed: the resource allocation failed");
      });
      FAIL("expected an OutOfMemoryError");
    } catch (const OutOfMemoryError& e) {
      const std::string message = e.what();
      CHECK(message.find("cuBLAS cublasGemmEx failed: the resource allocation failed; again after the engine's cache "
                         "was given back (0 B in use by tensors, 0 B reserved)") != std::string::npos);
      CHECK(message.find("batch_size") != std::string::npos);
    }
    CHECK(calls == 2);
  }
  SUBCASE("other failures pass through untouched, and the cache stays") {
    CHECK_THROWS_WITH_AS(run_with_library_memory_retry(allocator, [&] {
                           ++calls;
                           throw Error("cuDNN cudnnConvolutionForward failed: bad param");
                         }),
                         "cuDNN cudnnConvolutionForward failed: bad param", Error);
    CHECK(calls == 1);
    CHECK(sys.frees == 0);
  }
}

TEST_CASE("stream workspaces: one per stream, and the allocator is called with no lock held") {
  FakeSystem sys;
  CachingAllocator inner = sys.make();
  StreamWorkspaces workspaces(4 * KiB);
  // An allocator that, like the CUDA context's, may be entered again while it works: asking the
  // workspaces for another stream from inside allocate deadlocks if get() held its lock meanwhile.
  struct Reentrant : Allocator {
    Allocator* inner;
    StreamWorkspaces* workspaces;
    std::atomic<int> allocations{0}, deallocations{0};
    std::mutex mutex;
    void* allocate(size_t bytes) override {
      ++allocations;
      static int side_stream;
      workspaces->bytes();
      if (allocations == 1) workspaces->get(&side_stream, *this);
      std::lock_guard<std::mutex> lock(mutex);
      return inner->allocate(bytes);
    }
    void deallocate(void* p, size_t bytes) override {
      ++deallocations;
      std::lock_guard<std::mutex> lock(mutex);
      inner->deallocate(p, bytes);
    }
    AllocatorStats stats() const override { return inner->stats(); }
    void reset_peak() override {}
  } allocator;
  allocator.inner = &inner;
  allocator.workspaces = &workspaces;

  constexpr int kStreams = 64;
  std::vector<int> streams(kStreams);
  std::vector<void*> seen[2];
  auto run = [&](int t) {
    for (int i = 0; i < kStreams; ++i) seen[t].push_back(workspaces.get(&streams[static_cast<size_t>(i)], allocator));
  };
  // Detached, so that a deadlock fails the test instead of hanging it.
  auto done = std::make_shared<std::promise<void>>();
  std::future<void> finished = done->get_future();
  std::thread([&, done] {
    std::thread a(run, 0), b(run, 1);
    a.join();
    b.join();
    done->set_value();
  }).detach();
  REQUIRE_MESSAGE(finished.wait_for(std::chrono::seconds(20)) == std::future_status::ready,
                  "two threads taking workspaces deadlocked");
  CHECK(seen[0] == seen[1]);  // both threads got the same buffer for each stream
  CHECK(workspaces.count() == kStreams + 1);
  CHECK(allocator.allocations - allocator.deallocations == kStreams + 1);  // the losers gave theirs back
  CHECK(std::set<void*>(seen[0].begin(), seen[0].end()).size() == kStreams);
  workspaces.release(allocator);
  CHECK(workspaces.count() == 0);
  CHECK(allocator.allocations == allocator.deallocations);
  CHECK(inner.stats().in_use == 0);
}

TEST_CASE("without caching: every block is a system allocation of its exact size, given back when freed") {
  // CNN_NO_CUDA_MEMORY_CACHING=1: what compute-sanitizer needs to see an access past a block's end.
  FakeSystem sys;
  CachingAllocator alloc = sys.make({.caching = false});
  for (int step = 0; step < 3; ++step) {
    void* a = alloc.allocate(1000);
    void* b = alloc.allocate(3 * MiB + 7);
    void* empty = alloc.allocate(0);
    CHECK(sys.live.at(a) == 1000);          // not rounded to 512 bytes, not carved from a segment
    CHECK(sys.live.at(b) == 3 * MiB + 7);
    CHECK(sys.live.at(empty) == 1);         // an empty tensor still gets an address of its own
    CHECK(alloc.stats().in_use == 1000 + 3 * MiB + 7 + 1);
    CHECK(alloc.stats().reserved == alloc.stats().in_use);
    alloc.deallocate(a, 1000);
    CHECK(sys.live.count(a) == 0);          // freed at once
    alloc.deallocate(b, 0);
    alloc.deallocate(empty, 0);
  }
  CHECK(sys.mallocs == 9);  // three per step: nothing was reused
  CHECK(sys.frees == 9);
  CHECK(sys.live.empty());
  CHECK(alloc.stats().reserved == 0);
  CHECK(alloc.cached_blocks() == 0);
  CHECK(alloc.largest_free_block() == 0);
}

TEST_CASE("without caching: a block another stream used goes back only once that stream's event has passed") {
  FakeSystem sys;
  CachingAllocator alloc = sys.make({.caching = false});
  int compute = 0, communication = 0;
  sys.stream = &compute;
  void* p = alloc.allocate(64 * KiB);
  alloc.record_stream(p, &communication);
  alloc.deallocate(p, 0);
  REQUIRE(sys.events.size() == 1);
  CHECK(sys.event_streams[0] == &communication);
  CHECK(sys.frees == 0);  // the collective may still read it
  void* q = alloc.allocate(64 * KiB);
  CHECK(sys.frees == 0);  // its event has not passed
  sys.events[0]->done = true;
  void* r = alloc.allocate(64 * KiB);  // the next allocation sees it pass
  CHECK(sys.frees == 1);
  CHECK(sys.destroyed_events == 1);
  alloc.deallocate(q, 0);
  alloc.deallocate(r, 0);
  CHECK(sys.live.empty());

  SUBCASE("empty_cache waits for it") {
    void* s = alloc.allocate(64 * KiB);
    alloc.record_stream(s, &communication);
    alloc.deallocate(s, 0);
    alloc.empty_cache();
    CHECK(sys.waits == 1);
    CHECK(sys.live.empty());
  }
}

TEST_CASE("without caching: a block freed during a graph capture goes back once the capture has ended") {
  // cudaFree cannot run while CUDA captures a graph.
  FakeSystem sys;
  CachingAllocator alloc = sys.make({.caching = false});
  void* before = alloc.allocate(4 * KiB);
  alloc.capture_begins();
  alloc.deallocate(before, 0);
  void* during = alloc.allocate(4 * KiB);  // allocating is allowed (relaxed mode, in the real system)
  alloc.deallocate(during, 0);
  CHECK(sys.frees == 0);
  CHECK_THROWS_WITH_AS(alloc.empty_cache(), doctest::Contains("during a CUDA graph capture"), Error);
  alloc.capture_ends();
  void* after = alloc.allocate(4 * KiB);
  CHECK(sys.frees == 2);
  CHECK(sys.live.size() == 1);
  alloc.deallocate(after, 0);
  CHECK(sys.live.empty());
  CHECK(alloc.stats().reserved == 0);
}

TEST_CASE("without caching: a system free that fails is reported by the next allocate") {
  // deallocate runs in Storage's destructor and must not throw: the error waits, as for events.
  bool fail = false;
  CachingSystem system;
  system.alloc = [](size_t bytes) { return std::malloc(bytes); };
  system.free = [&](void* p) {
    if (fail) throw Error("cudaFree failed: an illegal memory access was encountered");
    std::free(p);
  };
  system.current_stream = []() -> void* { return nullptr; };
  system.name = "fake:1";
  void* p = nullptr;
  {
    CachingAllocator uncached(std::move(system), {.caching = false});
    p = uncached.allocate(100);
    fail = true;
    CHECK_NOTHROW(uncached.deallocate(p, 100));
    CHECK_THROWS_WITH_AS(uncached.allocate(100),
                         doctest::Contains("giving 100 B back to fake:1 failed: cudaFree failed: an illegal memory "
                                           "access was encountered; the memory is kept out of use"),
                         Error);
    fail = false;
  }
  std::free(p);  // the allocator kept it after the failure
}

TEST_CASE("the allocator options come from CNN_CUDA_MAX_SPLIT_MB and CNN_NO_CUDA_MEMORY_CACHING") {
  const CachingAllocatorOptions unset = caching_options_from_environment(nullptr, nullptr);
  CHECK(unset.caching);
  CHECK(unset.max_split_bytes == SIZE_MAX);
  CHECK_FALSE(caching_options_from_environment(nullptr, "1").caching);
  CHECK(caching_options_from_environment(nullptr, "0").caching);
  CHECK(caching_options_from_environment("512", nullptr).max_split_bytes == 512 * MiB);
  CHECK_THROWS_WITH_AS(caching_options_from_environment(nullptr, "yes"),
                       doctest::Contains("CNN_NO_CUDA_MEMORY_CACHING=yes is neither 1"), Error);
  CHECK_THROWS_WITH_AS(caching_options_from_environment("lots", nullptr),
                       doctest::Contains("CNN_CUDA_MAX_SPLIT_MB=lots is not a positive number of MiB"), Error);
}

TEST_CASE("largest_free_block: the largest block the calling thread's stream can take without the system") {
  FakeSystem sys;
  CachingAllocator alloc = sys.make();
  int stream_a = 0, stream_b = 0;
  sys.stream = &stream_a;
  CHECK(alloc.largest_free_block() == 0);
  void* big = alloc.allocate(30 * MiB);
  void* small = alloc.allocate(12 * MiB);
  CHECK(alloc.largest_free_block() == 0);  // both in use
  alloc.deallocate(small, 0);
  CHECK(alloc.largest_free_block() == 12 * MiB);
  alloc.deallocate(big, 0);
  CHECK(alloc.largest_free_block() == 30 * MiB);
  sys.stream = &stream_b;
  CHECK(alloc.largest_free_block() == 0);  // another stream's blocks are not for it
}

TEST_CASE("pinned host memory: one pool for every stream, and a block a copy used waits for that copy") {
  // pinned_allocator() on a GPU: cudaHostAlloc underneath, its blocks tagged as host memory rather
  // than with a stream, events recorded on the streams of the copies (record_stream) at free time.
  FakeSystem sys;
  int host_tag = 0, copy_stream = 0;
  sys.stream = &host_tag;
  CachingAllocator pinned = sys.make();
  void* batch = pinned.allocate(6 * MiB);
  pinned.deallocate(batch, 0);
  void* next = pinned.allocate(6 * MiB);  // freed, not given back: the same block, no cudaFreeHost
  CHECK(next == batch);
  CHECK(sys.mallocs == 1);
  CHECK(sys.frees == 0);
  pinned.record_stream(next, &copy_stream);
  pinned.record_stream(next, nullptr);  // the legacy default stream is a stream like the others here
  pinned.deallocate(next, 0);
  REQUIRE(sys.events.size() == 2);
  CHECK(sys.event_streams == std::vector<void*>{&copy_stream, nullptr});
  void* during = pinned.allocate(6 * MiB);
  CHECK(during != batch);  // the copies may still read it
  sys.events[0]->done = true;
  sys.events[1]->done = true;
  pinned.deallocate(during, 0);
  void* after = pinned.allocate(6 * MiB);
  CHECK(after == batch);
  pinned.deallocate(after, 0);
}

TEST_CASE("a system without events: record_stream is a no-op, and the block is reused as usual") {
  // Host memory, and pinned memory without a GPU: before, the free tried to record an event it had
  // no way to, and kept the block out of use with an error for the next allocate.
  FakeSystem sys;
  sys.has_events = false;
  CachingAllocator alloc = sys.make();
  int other = 0;
  void* p = alloc.allocate(4 * KiB);
  alloc.record_stream(p, &other);
  alloc.deallocate(p, 0);
  void* q = nullptr;
  CHECK_NOTHROW(q = alloc.allocate(4 * KiB));
  CHECK(q == p);
  alloc.deallocate(q, 0);
}

TEST_CASE("pinned host tensors reuse cached blocks, so repeated pinning stops calling the system allocator") {
  // Before, every pinned block was a cudaHostAlloc and a cudaFreeHost (which waits for the device).
  Allocator& pinned = pinned_allocator();
  const Tensor values = Tensor::full({1000, 1000}, 1.5);
  auto step = [&] {
    Tensor a = values.pin_memory();
    Tensor b = Tensor::empty({256}, DType::i64, Device::cpu(), /*pinned=*/true);
    a.record_stream(nullptr);  // a no-op without a GPU; with one, an event on the legacy stream
    CHECK(a.to_doubles()[999999] == 1.5);
  };
  step();
  const uint64_t system_calls = pinned.stats().system_allocations;
  for (int i = 0; i < 5; ++i) step();
#if CNN_SANITIZED
  if (!cuda::is_available()) return;  // without a GPU, pinned memory is the sanitizer's plain host memory
#endif
  CHECK(pinned.stats().system_allocations == system_calls);
}

TEST_CASE("host allocator statistics follow tensors") {
  Allocator& host = cpu_allocator();
  const size_t before = host.stats().in_use;
  host.reset_peak();
  {
    Tensor t = Tensor::empty({1024, 256});  // 1 MiB
    CHECK(host.stats().in_use == before + (1 << 20));
  }
  CHECK(host.stats().in_use == before);
  CHECK(host.stats().peak_in_use >= before + (1 << 20));
}

TEST_CASE("host tensors reuse cached blocks, so a repeated step stops calling the system allocator") {
  Allocator& host = cpu_allocator();
  auto step = [] {
    Tensor a = Tensor::empty({3000, 1000}), b = Tensor::empty({50, 50});  // 12 MB and 10 kB
    Tensor c = Tensor::empty({1024, 1024});
  };
  step();
  const uint64_t system_calls = host.stats().system_allocations, calls = host.stats().allocations;
  for (int i = 0; i < 5; ++i) step();
  CHECK(host.stats().allocations == calls + 15);
#if CNN_SANITIZED
  CHECK(host.stats().system_allocations == system_calls + 15);  // malloc and free, for the sanitizer
#else
  CHECK(host.stats().system_allocations == system_calls);
#endif
}

namespace {
// The kernel's view of the mapping that holds `p`: the "THPeligible:" field of its /proc/self/smaps
// entry (1 when huge pages may back it), or -1 when the entry or the field is missing.
int huge_page_eligible(const void* p) {
  std::ifstream smaps("/proc/self/smaps");
  const auto address = reinterpret_cast<uintptr_t>(p);
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    uintptr_t begin = 0, end = 0;
    char dash = 0;
    std::istringstream range(line);
    if (range >> std::hex >> begin >> dash >> end && dash == '-') {
      inside = begin <= address && address < end;
      continue;
    }
    if (inside && line.rfind("THPeligible:", 0) == 0) return std::stoi(line.substr(12));
  }
  return -1;
}

std::string transparent_huge_pages_mode() {
  std::ifstream f("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string all;
  std::getline(f, all);
  const size_t open = all.find('['), close = all.find(']');
  return open == std::string::npos || close == std::string::npos ? "" : all.substr(open + 1, close - open - 1);
}
}  // namespace

TEST_CASE("large host blocks are 2 MiB aligned and may be backed by huge pages, small ones stay 64-byte aligned") {
  // 12 MiB: a segment of its own in the caching allocator, and a whole multiple of 2 MiB for the
  // plain allocator of sanitizer builds alike.
  Tensor large = Tensor::empty({int64_t{3} << 20});
  Tensor small = Tensor::empty({50, 50});
  CHECK(reinterpret_cast<uintptr_t>(small.data()) % 64 == 0);
  // A block of a larger segment starts at the segment's start or 512-byte steps after it.
  CHECK(reinterpret_cast<uintptr_t>(large.data()) % 512 == 0);
  const std::string mode = transparent_huge_pages_mode();
  if (mode != "madvise" && mode != "always") {
    MESSAGE("transparent huge pages are '" << mode << "' here: eligibility not checked");
    return;
  }
  std::fill_n(large.data_as<float>(), large.numel(), 1.f);
  const int eligible = huge_page_eligible(large.data());
  if (eligible < 0) {
    MESSAGE("this kernel's /proc/self/smaps has no THPeligible field: eligibility not checked");
    return;
  }
  // With "madvise" the mapping is eligible only because the allocator advised it.
  CHECK(eligible == 1);
}

TEST_CASE("the host allocator asks the system for 2 MiB-aligned memory for whole multiples of 2 MiB") {
#if CNN_SANITIZED
  // Sanitizer builds allocate each tensor on its own: a block of exactly 4 MiB is a whole segment.
  Tensor t = Tensor::empty({1 << 20});
  CHECK(reinterpret_cast<uintptr_t>(t.data()) % kHostHugePage == 0);
#else
  // The caching allocator's fresh segments: a request larger than any cached block gets one of its
  // own, which starts at the segment's start.
  Tensor t = Tensor::empty({int64_t{40} << 20});  // 160 MiB
  CHECK(reinterpret_cast<uintptr_t>(t.data()) % kHostHugePage == 0);
#endif
}
