// Captured graphs (see graph.h): the thread's capture, the CPU recording and the CUDA graph calls.
#include "engine/graph.h"

#include <cstring>
#include <memory>
#include <vector>

#include "engine/cuda_context.h"
#include "engine/error.h"
#include "engine/graph_memory_pool.h"
#include "engine/host_sync_check.h"
#include "engine/profiler.h"

namespace cnn {

struct CapturedGraph::State {
  Device device;
  std::shared_ptr<GraphMemoryPool> pool;
  std::vector<std::function<void()>> calls;        // CPU: the recorded calls, in order
  std::vector<std::shared_ptr<const void>> kept;   // CPU: host data they point to
  void* exec = nullptr;                            // CUDA: the executable graph
  // CUDA: marks the end of the last replay, on whichever stream it ran (launches of one graph run
  // in order, so it is the end of every replay).
  std::unique_ptr<cuda::Event> replayed;
};

namespace {
// The capture under way on this thread.
struct Capture {
  Device device;
  std::shared_ptr<GraphMemoryPool> pool;
  std::vector<std::function<void()>>* calls = nullptr;
  std::vector<std::shared_ptr<const void>>* kept = nullptr;
};
thread_local Capture* current = nullptr;

// Opens the thread's capture for its lifetime.
class CaptureScope {
 public:
  explicit CaptureScope(Capture& capture) { current = &capture; }
  ~CaptureScope() { current = nullptr; }
  CaptureScope(const CaptureScope&) = delete;
  CaptureScope& operator=(const CaptureScope&) = delete;
};

void run_checked(const std::function<void()>& work, const std::string& what, Capture& capture) {
  const CaptureScope scope(capture);
  const HostSyncCheck check("the capture of " + what);
  work();
}
}  // namespace

CapturedGraph::CapturedGraph(Device device, const std::function<void()>& work, const std::string& what)
    : state_(std::make_unique<State>()) {
  CNN_CHECK(current == nullptr, "cannot capture ", what, " during the capture of another graph: captures do not nest");
  state_->device = device;
  Allocator& underneath = device.is_cuda() ? cuda_allocator(device.index) : cpu_allocator();
  state_->pool = std::make_shared<GraphMemoryPool>(underneath);
  Capture capture{device, state_->pool, &state_->calls, &state_->kept};
  if (device.is_cpu()) {
    try {
      run_checked(work, what, capture);
    } catch (...) {
      state_->pool->release();
      throw;
    }
  } else {
    const int index = device.index;
    void* stream = cuda::capture_stream(index);
    underneath.capture_begins();
    bool begun = false;
    try {
      cuda::begin_capture(index, stream);
      begun = true;
      run_checked(work, what, capture);
      begun = false;  // end_capture ends it, whether or not it succeeds
      state_->exec = cuda::end_capture(index, stream);
    } catch (...) {
      if (begun) cuda::end_capture(index, stream, /*abandon=*/true);
      underneath.capture_ends();
      state_->pool->release();
      throw;
    }
    underneath.capture_ends();
  }
  state_->pool->end_capture();
}

CapturedGraph::~CapturedGraph() {
  if (state_->exec != nullptr) {
    try {
      // The last replay may still use the pool's memory. It ran on the stream that was current
      // then, which need not be the current stream now (a caller's own, set back since).
      if (state_->replayed) state_->replayed->synchronize();
    } catch (...) {  // a broken device fails loudly elsewhere; the memory is given back regardless
    }
    cuda::destroy_graph(state_->exec);
  }
  state_->pool->release();
}

void CapturedGraph::replay() {
  const profiler::Scope span("graph replay", profiler::Category::phase, state_->device);
  if (state_->device.is_cpu()) {
    for (const std::function<void()>& call : state_->calls) call();
  } else {
    const int index = state_->device.index;
    void* stream = cuda::current_stream(index);
    cuda::launch_graph(index, state_->exec, stream);
    if (!state_->replayed) state_->replayed = std::make_unique<cuda::Event>(index);
    state_->replayed->record(stream);
  }
}

Device CapturedGraph::device() const { return state_->device; }

AllocatorStats CapturedGraph::memory() const { return state_->pool->stats(); }

size_t CapturedGraph::recorded_calls() const { return state_->calls.size(); }

namespace graph_capture {

std::shared_ptr<GraphMemoryPool> pool_for(Device device) {
  if (current == nullptr || current->device != device) [[likely]]
    return nullptr;
  return current->pool;
}

bool recording_cpu() { return current != nullptr && current->device.is_cpu(); }

void record_cpu_call(std::function<void()> call) {
  CNN_CHECK(recording_cpu(), "record_cpu_call outside the capture of CPU work");
  current->calls->push_back(std::move(call));
}

void keep_alive(std::shared_ptr<const void> object) {
  CNN_CHECK(recording_cpu(), "keep_alive outside the capture of CPU work");
  current->kept->push_back(std::move(object));
}

void copy_on_cpu(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  if (recording_cpu())
    record_cpu_call([dst, src, bytes] { std::memcpy(dst, src, bytes); });
  else
    std::memcpy(dst, src, bytes);
}

}  // namespace graph_capture
}  // namespace cnn
