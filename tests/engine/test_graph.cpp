// Captured graphs on the CPU (engine/graph.h): the emulation of CUDA graphs that records kernel
// calls and copies with their arguments and replays them, and the graph's memory pool
// (engine/graph_memory_pool.h). What holds here holds for a CUDA graph: nothing runs during the
// capture, a replay runs exactly what was recorded, host reads are refused, and the memory of the
// capture stays the graph's until it is gone.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <optional>
#include <vector>

#include "engine/cnn.h"
#include "engine/graph.h"
#include "engine/graph_memory_pool.h"

using namespace cnn;

namespace {
// relu(2 x - 1) summed, and the elementwise part kept: a few kernels and temporaries.
struct SmallWork {
  Tensor x = Tensor::from_vector<float>({-1, 0.25f, 1, 3}, {4});
  Tensor activations, total;
  void operator()() {
    NoGrad no_grad;
    activations = relu(sub(scale(x, 2.0), Tensor::ones({4})));
    total = sum(activations);
  }
};
}  // namespace

TEST_CASE("a captured CPU graph runs nothing during the capture and the recorded work at each replay") {
  SmallWork work;
  CapturedGraph graph(Device::cpu(), [&] { work(); }, "a test stretch");
  CHECK(graph.recorded_calls() >= 4);  // the ones fill, scale, sub, relu, sum
  Tensor(work.total).fill_(-7.0);      // not computed yet: a replay must write it
  graph.replay();
  CHECK(work.activations.to_doubles() == std::vector<double>{0, 0, 1, 5});
  CHECK(work.total.item() == 6.0);
  // New inputs go into the tensor the capture read; the replay uses them.
  work.x.copy_(Tensor::from_vector<float>({2, 2, 0, 0}, {4}));
  graph.replay();
  CHECK(work.total.item() == 6.0);
  CHECK(work.activations.to_doubles() == std::vector<double>{3, 3, 0, 0});
  // A tensor put in the input's place after the capture is not what the graph reads: it reads the
  // memory of the tensor it captured, which must stay alive as long as the graph (as on CUDA).
  const Tensor captured_x = work.x;
  work.x = Tensor::from_vector<float>({10, 10, 10, 10}, {4});
  graph.replay();
  CHECK(work.total.item() == 6.0);
}

TEST_CASE("host scalars are fixed at capture: a number computed on the host is replayed as it was") {
  Tensor x = Tensor::ones({3});
  Tensor y;
  double factor = 2.0;
  CapturedGraph graph(Device::cpu(), [&] { y = scale(x, factor); }, "a test stretch");
  factor = 5.0;  // too late: the graph holds the 2
  graph.replay();
  CHECK(y.to_doubles() == std::vector<double>{2, 2, 2});
}

TEST_CASE("a host read during the capture is refused, names the call, and leaves nothing captured") {
  SmallWork work;
  CHECK_THROWS_WITH_AS(CapturedGraph(Device::cpu(), [&] { work(); (void)work.total.item(); }, "the test step"),
                       doctest::Contains("reading a tensor's values on the host during the capture of the test step"),
                       Error);
  CHECK_THROWS_WITH_AS(CapturedGraph(Device::cpu(), [&] { (void)work.x.to_doubles(); }, "the test step"),
                       doctest::Contains("during the capture of the test step"), Error);
  // The failed capture is over: work runs eagerly again, and a new capture works.
  work();
  CHECK(work.total.item() == 6.0);
  CapturedGraph graph(Device::cpu(), [&] { work(); }, "a test stretch");
  graph.replay();
  CHECK(work.total.item() == 6.0);
}

TEST_CASE("captures do not nest") {
  SmallWork work;
  CHECK_THROWS_WITH_AS(CapturedGraph(Device::cpu(),
                                     [&] { CapturedGraph inner(Device::cpu(), [&] { work(); }, "the inner stretch"); },
                                     "the outer stretch"),
                       doctest::Contains("cannot capture the inner stretch during the capture of another graph"), Error);
}

TEST_CASE("the capture's memory stays the graph's: tensors made after it never share it") {
  // Tensors of the capture's sizes made after it, filled with a pattern: with the capture's
  // temporaries back in the allocator's cache they would take their blocks, and each replay
  // would overwrite the pattern.
  const AllocatorStats before = cpu_allocator().stats();
  {
    Tensor x = Tensor::uniform({64, 64}, -1, 1, 3);
    Tensor out;
    CapturedGraph graph(Device::cpu(), [&] {
      NoGrad no_grad;
      Tensor a = relu(x), b = exp(a), c = mul(b, a);  // temporaries freed during the capture
      out = sum(c);
    }, "a test stretch");
    CHECK(graph.memory().reserved > 0);
    CHECK(graph.memory().in_use > 0);  // out is still held
    std::vector<Tensor> others;
    for (int i = 0; i < 8; ++i) others.push_back(Tensor::full({64, 64}, 42.0));
    graph.replay();
    graph.replay();
    for (const Tensor& t : others) CHECK(sum(t).item() == 42.0 * 64 * 64);
    const double expected = sum(mul(exp(relu(x)), relu(x))).item();
    CHECK(out.item() == doctest::Approx(expected).epsilon(1e-6));
  }
  // The graph and its tensors are gone: so is their memory.
  CHECK(cpu_allocator().stats().in_use == before.in_use);
}

TEST_CASE("a graph's pool: reuse within the capture, nothing after it, blocks back once the graph and its tensors are gone") {
  HostAllocator host([](size_t bytes) { return std::malloc(bytes); }, [](void* p) { std::free(p); });
  auto pool = std::make_shared<GraphMemoryPool>(host);
  void* a = pool->allocate(1000);
  pool->deallocate(a, 1000);
  void* b = pool->allocate(900);  // a's block, freed earlier in the capture
  CHECK(b == a);
  void* c = pool->allocate(100);  // too small for a 1000-byte block? it is free no more anyway
  CHECK(c != a);
  pool->deallocate(c, 100);
  void* d = pool->allocate(10);   // c's 100 bytes fit a 10-byte request (at most 2 x 10 + 4 KiB)
  CHECK(d == c);
  void* e = pool->allocate(100000);
  CHECK(pool->stats().reserved == 1000 + 100 + 100000);
  CHECK(host.stats().in_use == 1000 + 100 + 100000);
  pool->end_capture();
  CHECK_THROWS_WITH_AS(pool->allocate(10), doctest::Contains("only during its capture"), Error);
  pool->deallocate(e, 100000);
  CHECK(host.stats().in_use == 1000 + 100 + 100000);  // still the graph's
  pool->release();                                     // the graph is gone: e goes back
  CHECK(host.stats().in_use == 1000 + 100);
  pool->deallocate(b, 900);                            // a tensor of the graph goes: its block too
  CHECK(host.stats().in_use == 100);
  pool.reset();                                        // the last holder: everything
  CHECK(host.stats().in_use == 0);
  (void)d;
}

// The CUDA calls that make the host wait for the device, or that free or query memory and events,
// cannot be captured into a CUDA graph, and a stray one in a kernel wrapper would only show on a
// GPU. So they live in the files that guard them, each known here: the CUDA context (its waits are
// host_sync_points, its allocator's event queries and frees are skipped during a capture), the
// event query that the context and its allocators share (kernels/cuda/runtime_status.h), the
// profiler's timing events, and the NCCL communicator (data-parallel steps are not captured).
TEST_CASE("the CUDA calls a graph capture forbids appear only where they are guarded") {
  const std::map<std::string, std::multiset<std::string>> allowed = {
      {"engine/cuda_context.cpp",
       {"cudaStreamSynchronize", "cudaStreamSynchronize", "cudaEventSynchronize", "cudaEventSynchronize", "cudaMalloc",
        "cudaFree", "cudaHostAlloc", "cudaFreeHost"}},
      {"kernels/cuda/runtime_status.h", {"cudaEventQuery"}},
      {"engine/cuda_event_timing.cpp", {"cudaEventSynchronize"}},
      {"engine/distributed/nccl_communicator.cpp", {"cudaStreamSynchronize", "cudaEventSynchronize", "cudaEventQuery"}},
  };
  const std::regex call(R"(\b(cudaMemcpy|cudaMemset|cudaDeviceSynchronize|cudaStreamSynchronize|cudaEventSynchronize|)"
                        R"(cudaStreamQuery|cudaEventQuery|cudaMalloc|cudaMallocHost|cudaHostAlloc|cudaFree|cudaFreeHost)\s*\()");
  std::map<std::string, std::multiset<std::string>> found;
  const std::filesystem::path root = CNN_SOURCE_DIR;
  for (const char* folder : {"engine", "kernels", "layers", "data", "train", "apps"})
    for (const auto& entry : std::filesystem::recursive_directory_iterator(root / folder)) {
      const std::string ext = entry.path().extension().string();
      if (ext != ".cpp" && ext != ".cu" && ext != ".cuh" && ext != ".h") continue;
      std::ifstream in(entry.path());
      const std::string name = std::filesystem::relative(entry.path(), root).generic_string();
      for (std::string line; std::getline(in, line);) {
        const size_t comment = line.find("//");
        const std::string code = line.substr(0, comment);
        for (auto it = std::sregex_iterator(code.begin(), code.end(), call); it != std::sregex_iterator(); ++it)
          found[name].insert((*it)[1].str());
      }
    }
  CHECK(found.size() >= 2);  // the scan saw the sources
  for (const auto& [file, calls] : found) {
    INFO(file << ": a call that a CUDA graph capture forbids; guard it (host_sync_point, or skip it during a capture) "
                 "and list it here, or use the stream-ordered form");
    const auto it = allowed.find(file);
    REQUIRE(it != allowed.end());
    CHECK(calls == it->second);
  }
}
