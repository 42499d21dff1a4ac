// The caching allocator's policy, driven by a fake system allocator so that it runs without a GPU,
// and the host allocator's statistics.
#include <doctest/doctest.h>

#include <cstdlib>
#include <set>

#include "engine/cnn.h"

using namespace cnn;

namespace {
struct FakeSystem {
  int mallocs = 0, frees = 0;
  void* stream = nullptr;
  std::set<void*> live;
  CachingAllocator make() {
    return CachingAllocator(
        [this](size_t bytes) {
          ++mallocs;
          void* p = std::malloc(bytes);
          live.insert(p);
          return p;
        },
        [this](void* p) {
          ++frees;
          live.erase(p);
          std::free(p);
        },
        [this] { return stream; });
  }
};
}  // namespace

TEST_CASE("size classes: 512-byte steps to 1 MiB, 2 MiB steps above") {
  CHECK(CachingAllocator::size_class(1) == 512);
  CHECK(CachingAllocator::size_class(513) == 1024);
  CHECK(CachingAllocator::size_class(1 << 20) == (1 << 20));
  CHECK(CachingAllocator::size_class((1 << 20) + 1) == (2 << 20));
  CHECK(CachingAllocator::size_class(5 << 20) == (6 << 20));
}

TEST_CASE("a repeated allocation pattern stops calling the system allocator") {
  FakeSystem sys;
  {
    CachingAllocator alloc = sys.make();
    auto step = [&] {
      void* a = alloc.allocate(1000);
      void* b = alloc.allocate(3 << 20);
      void* c = alloc.allocate(1000);
      alloc.deallocate(a, 1000);
      alloc.deallocate(b, 3 << 20);
      alloc.deallocate(c, 1000);
    };
    step();
    const int after_first = sys.mallocs;
    CHECK(after_first == 3);
    for (int i = 0; i < 10; ++i) step();
    CHECK(sys.mallocs == after_first);  // steady state: no system calls
    AllocatorStats s = alloc.stats();
    CHECK(s.in_use == 0);
    CHECK(s.peak_in_use == 1024 + (4 << 20) + 1024);
    CHECK(s.reserved == 1024 + (4 << 20) + 1024);
    CHECK(s.allocations == 33);
    CHECK(s.system_allocations == 3);
    alloc.empty_cache();
    CHECK(alloc.stats().reserved == 0);
    CHECK(sys.live.empty());
  }
}

TEST_CASE("a freed block is reused only on the stream it was used on") {
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
