// A captured stretch of work, replayed as one unit: a CUDA graph on a CUDA device, and its
// emulation on the CPU, so that what a graph changes can be tested without a GPU.
//
//   CapturedGraph step(device, [&] { loss = train_step(static_images, static_labels); });
//   step.replay();                                  // the step, as captured
//   static_images.copy_(next_images); step.replay();  // the next one
//
// Capturing runs the host code of `work` once, and records what it enqueues instead of running
// it: on CUDA each kernel launch and copy (cudaStreamBeginCapture on the device's capture stream,
// then cudaGraphInstantiate); on the CPU each kernel call of CNN_KERNEL, each convolution and each
// copy, with the arguments it was given. A replay runs the recorded work again (cudaGraphLaunch on
// the device's current stream; the recorded calls in order on the CPU) and nothing else. So
// everything the host computed during the capture is fixed: pointers, sizes, scalars, which ops
// ran. Only device memory can differ between replays: write new inputs into the tensors the
// capture read, keep per-step numbers (a learning rate) in device tensors. The tensors made before
// the capture that it reads or writes must stay alive as long as the graph: a replay uses their
// memory, whoever holds it by then.
//
// What a capture forbids, and how it is caught:
//   - waiting for the device (a value read on the host, a copy to or from the host, a stream or
//     event synchronisation): the capture runs under a HostSyncCheck, which throws naming the call;
//     on a GPU CUDA's thread-local capture mode also refuses such calls;
//   - memory: tensors allocated during the capture come from the graph's own pool
//     (engine/graph_memory_pool.h), which keeps their blocks for as long as the graph lives; the
//     device's cache cannot be emptied during a capture (a cnn::Error);
//   - captures do not nest, and a capture covers one device.
// A failed capture throws cnn::Error with its reason and leaves nothing captured: the caller can
// run the work eagerly instead (the trainer's [train] cuda_graphs falls back that way).
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "engine/allocator.h"
#include "engine/device.h"

namespace cnn {

class GraphMemoryPool;

class CapturedGraph {
 public:
  // Captures `work` on `device` (nothing of it runs); `what` names it in errors ("the training step").
  CapturedGraph(Device device, const std::function<void()>& work, const std::string& what);
  ~CapturedGraph();  // on a GPU, waits for the last replay before giving the graph's memory back
  CapturedGraph(const CapturedGraph&) = delete;
  CapturedGraph& operator=(const CapturedGraph&) = delete;

  // Runs the captured work once more (enqueued on the device's current stream on a GPU).
  void replay();
  Device device() const;
  // The graph's memory pool: bytes its tensors use and the pool holds.
  AllocatorStats memory() const;
  // CPU: the kernel calls and copies recorded (0 on a GPU).
  size_t recorded_calls() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

namespace graph_capture {

// The pool of the capture under way on this thread, when it is of `device`; null otherwise.
// Storage allocates from it (pinned host memory excepted).
std::shared_ptr<GraphMemoryPool> pool_for(Device device);

// Whether this thread is capturing CPU work: CNN_KERNEL records CPU kernel calls instead of
// running them. record_cpu_call appends one (it runs at every replay).
bool recording_cpu();
void record_cpu_call(std::function<void()> call);
// Runs `call` now, or records it while this thread is capturing CPU work. `call` must hold its
// arguments by value (they are what a replay passes).
template <class Call>
void run_on_cpu(Call&& call) {
  if (recording_cpu()) [[unlikely]]
    record_cpu_call(std::function<void()>(std::forward<Call>(call)));
  else
    call();
}

// Host data that a recorded CPU call reads through a pointer (a table of multi-tensor slots: on a
// GPU those are kernel parameters, copied into the graph). While recording, a copy that lives as
// long as the graph; otherwise `value` itself.
void keep_alive(std::shared_ptr<const void> object);
template <class T>
const T& kept(const T& value) {
  if (!recording_cpu()) return value;
  auto copy = std::make_shared<const T>(value);
  keep_alive(copy);
  return *copy;
}

// A copy between two host buffers: recorded while capturing CPU work, else done at once.
void copy_on_cpu(void* dst, const void* src, size_t bytes);

}  // namespace graph_capture
}  // namespace cnn
