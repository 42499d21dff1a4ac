// CUDA context: device discovery, per-device compute and copy streams, cuBLAS/cuDNN handles and
// workspace, events, the device caching allocators and pinned host memory. Without CUDA every
// entry point explains that it is missing.
#include "engine/cuda_context.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "engine/allocator.h"
#include "engine/byte_size.h"
#include "engine/stream_workspaces.h"
#include "engine/config.h"
#include "engine/error.h"
#include "engine/graph.h"
#include "engine/host_sync_check.h"

#if CNN_WITH_CUDA
#include <cuda_runtime.h>

#include "kernels/cuda/library_status.h"
#include "kernels/cuda/runtime_status.h"
#endif

#if CNN_WITH_CUDA

namespace cnn::cuda {

namespace {
using kernels::cuda::check_runtime;
using kernels::cuda::report_runtime_failure;

struct DeviceState {
  std::atomic<void*> stream{nullptr};  // nullptr: the legacy default stream; read by loader threads too
  cublasHandle_t cublas = nullptr;
  cudaStream_t copy_stream = nullptr;  // host-to-device uploads (engine/async_copy.h), kept for the process
  cudaStream_t capture_stream = nullptr;  // CUDA graph captures (engine/graph.h), kept for the process
  std::vector<cudaStream_t> spare_streams;  // given back by take_stream's users, for the next one
  StreamWorkspaces cublas_workspaces{size_t{32} << 20};  // what cuBLAS itself reserves on Hopper
  cudnnHandle_t cudnn = nullptr;
  std::unique_ptr<CachingAllocator> allocator;
};

struct Context {
  std::mutex mutex;
  int count = -1;
  std::string unavailable_reason;
  std::unique_ptr<DeviceState[]> devices;  // count of them (not a vector: the atomic stream cannot move)

  Context() {
    int n = 0;
    const cudaError_t err = cudaGetDeviceCount(&n);
    if (err != cudaSuccess) {
      count = 0;
      unavailable_reason = cudaGetErrorString(err);
      (void)kernels::cuda::cleared(err);
    } else {
      count = n;
      if (n == 0) unavailable_reason = "no CUDA device found";
    }
    devices = std::make_unique<DeviceState[]>(static_cast<size_t>(count));
  }
};

Context& context() {
  static Context* ctx = new Context();  // never destroyed: tensors may outlive static destructors
  return *ctx;
}

// PyTorch's PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:N as CNN_CUDA_MAX_SPLIT_MB=N, and its
// PYTORCH_NO_CUDA_MEMORY_CACHING=1 as CNN_NO_CUDA_MEMORY_CACHING=1 (engine/allocator.h).
CachingAllocator::Options allocator_options() {
  return caching_options_from_environment(std::getenv("CNN_CUDA_MAX_SPLIT_MB"), std::getenv("CNN_NO_CUDA_MEMORY_CACHING"));
}

DeviceState& state(int device) {
  require_device(device);
  return context().devices[static_cast<size_t>(device)];
}
}  // namespace

bool is_available() { return context().count > 0; }
int device_count() { return context().count; }

void require_device(int device) {
  Context& ctx = context();
  CNN_CHECK(ctx.count > 0, "a CUDA tensor was requested on cuda:", device, " but CUDA is unavailable (",
            ctx.unavailable_reason, "); use device = cpu, or run on a machine with an NVIDIA GPU and driver");
  CNN_CHECK(device >= 0 && device < ctx.count, "cuda:", device, " requested but this machine has ", ctx.count,
            " CUDA device(s): use cuda:0 .. cuda:", ctx.count - 1);
}

void set_device(int device) {
  // Asked of the runtime each time (cheap), so a caller's own cudaSetDevice never leaves us stale.
  require_device(device);
  if (current_device() == device) return;
  check_runtime(cudaSetDevice(device), "cudaSetDevice to cuda:" + std::to_string(device));
}

int current_device() {
  int device = 0;
  check_runtime(cudaGetDevice(&device), "cudaGetDevice");
  return device;
}

namespace {
// The capture stream of the graph capture this thread runs (engine/graph.h): its work goes there,
// while other threads (the loader's uploads) keep the device's stream, which a capture must not see.
thread_local int capturing_device = -1;
thread_local void* capturing_stream = nullptr;
}  // namespace

void* current_stream(int device) {
  if (device == capturing_device) [[unlikely]]
    return capturing_stream;
  return state(device).stream;
}

void set_stream(int device, void* stream) { state(device).stream = stream; }

void synchronize(int device) {
  host_sync_point("a stream synchronisation");
  set_device(device);
  check_runtime(cudaStreamSynchronize(static_cast<cudaStream_t>(current_stream(device))),
                "cudaStreamSynchronize on cuda:" + std::to_string(device));
}

DeviceMemory memory_info(int device) {
  set_device(device);
  DeviceMemory m;
  check_runtime(cudaMemGetInfo(&m.free, &m.total), "cudaMemGetInfo on cuda:" + std::to_string(device));
  return m;
}

void* cublas_handle(int device) {
  DeviceState& s = state(device);
  std::lock_guard<std::mutex> lock(context().mutex);
  if (!s.cublas) {
    set_device(device);
    kernels::cuda::check_cublas(cublasCreate(&s.cublas), ("cublasCreate on cuda:" + std::to_string(device)).c_str());
  }
  return s.cublas;
}

Workspace cublas_workspace(int device) {
  // The block comes from the current stream's pool: it is only ever used there. The allocator is
  // fetched first, since it takes the context's lock.
  Allocator& allocator = cuda_allocator(device);
  StreamWorkspaces& workspaces = state(device).cublas_workspaces;
  return {workspaces.get(current_stream(device), allocator), workspaces.bytes()};
}

void* cudnn_handle(int device) {
  DeviceState& s = state(device);
  std::lock_guard<std::mutex> lock(context().mutex);
  if (!s.cudnn) {
    set_device(device);
    kernels::cuda::check_cudnn(cudnnCreate(&s.cudnn), ("cudnnCreate on cuda:" + std::to_string(device)).c_str());
  }
  return s.cudnn;
}

void copy(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes) {
  if (bytes == 0) return;
  if (dst_device.is_cpu() && src_device.is_cpu()) {
    graph_capture::copy_on_cpu(dst, src, bytes);
    return;
  }
  if (dst_device.is_cuda() && src_device.is_cuda() && dst_device.index != src_device.index) {
    // Between two GPUs: the copy runs on the destination's stream after the source's queued work
    // (which may still be writing the source), and the source's later work (which may reuse the
    // source's memory once it is freed) waits for the copy. Each stream is named with its device:
    // a null stream is the legacy default stream of whichever device is current.
    const int from = src_device.index, to = dst_device.index;
    void* src_stream = current_stream(from);
    void* dst_stream = current_stream(to);
    Event source_ready(from);
    source_ready.record(src_stream);
    source_ready.make_wait(to, dst_stream);
    set_device(to);
    check_runtime(cudaMemcpyPeerAsync(dst, to, src, from, bytes, static_cast<cudaStream_t>(dst_stream)),
                  "cudaMemcpyPeerAsync of " + format_bytes(static_cast<double>(bytes)) + " from " + src_device.str() +
                      " to " + dst_device.str());
    Event copied(to);
    copied.record(dst_stream);
    copied.make_wait(from, src_stream);
    return;
  }
  const int device = dst_device.is_cuda() ? dst_device.index : src_device.index;
  if (dst_device.is_cpu() || src_device.is_cpu()) host_sync_point(dst_device.is_cpu() ? "a copy to the host" : "a copy from the host");
  set_device(device);
  auto stream = static_cast<cudaStream_t>(current_stream(device));
  // What was copied, for the error: "cudaMemcpyAsync of 1.5 MiB from cuda:0 to cpu".
  const auto what = [&](const char* call) {
    return std::string(call) + " of " + format_bytes(static_cast<double>(bytes)) + " from " + src_device.str() +
           " to " + dst_device.str();
  };
  check_runtime(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream), what("cudaMemcpyAsync"));
  if (dst_device.is_cpu() || src_device.is_cpu())
    check_runtime(cudaStreamSynchronize(stream), what("cudaStreamSynchronize after the cudaMemcpyAsync"));
}

void copy_to_device_async(void* dst, const void* host_src, size_t bytes, void* stream) {
  check_runtime(cudaMemcpyAsync(dst, host_src, bytes, cudaMemcpyHostToDevice, static_cast<cudaStream_t>(stream)),
                "cudaMemcpyAsync of " + format_bytes(static_cast<double>(bytes)) + " from pinned host memory to the device");
}

Event::Event(int device) : device_(device) {
  set_device(device);
  cudaEvent_t e = nullptr;
  check_runtime(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreateWithFlags");
  event_ = e;
}
Event::~Event() {
  if (event_ != nullptr) report_runtime_failure(cudaEventDestroy(static_cast<cudaEvent_t>(event_)), "cudaEventDestroy");
}
void Event::record(void* stream) {
  set_device(device_);
  check_runtime(cudaEventRecord(static_cast<cudaEvent_t>(event_), static_cast<cudaStream_t>(stream)), "cudaEventRecord");
}
void Event::make_wait(void* stream) { make_wait(device_, stream); }
void Event::make_wait(int stream_device, void* stream) {
  set_device(stream_device);  // a null stream is the legacy default stream of the current device
  check_runtime(cudaStreamWaitEvent(static_cast<cudaStream_t>(stream), static_cast<cudaEvent_t>(event_), 0),
                "cudaStreamWaitEvent");
}
void Event::synchronize() {
  host_sync_point("an event synchronisation");
  check_runtime(cudaEventSynchronize(static_cast<cudaEvent_t>(event_)), "cudaEventSynchronize");
}
bool Event::done() { return kernels::cuda::event_passed(static_cast<cudaEvent_t>(event_)); }

namespace {
// A non-blocking stream of the device kept in `member` of its state, created on first use.
void* stream_of(int device, cudaStream_t DeviceState::*member) {
  DeviceState& s = state(device);
  std::lock_guard<std::mutex> lock(context().mutex);
  if (!(s.*member)) {
    set_device(device);
    check_runtime(cudaStreamCreateWithFlags(&(s.*member), cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  }
  return s.*member;
}
}  // namespace

void* take_stream(int device) {
  DeviceState& s = state(device);
  std::lock_guard<std::mutex> lock(context().mutex);
  if (!s.spare_streams.empty()) {
    cudaStream_t stream = s.spare_streams.back();
    s.spare_streams.pop_back();
    return stream;
  }
  set_device(device);
  cudaStream_t stream = nullptr;
  check_runtime(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking),
                "cudaStreamCreateWithFlags on cuda:" + std::to_string(device));
  return stream;
}

void give_back_stream(int device, void* stream) {
  if (stream == nullptr) return;
  DeviceState& s = state(device);
  std::lock_guard<std::mutex> lock(context().mutex);
  s.spare_streams.push_back(static_cast<cudaStream_t>(stream));
}

void* capture_stream(int device) { return stream_of(device, &DeviceState::capture_stream); }

void begin_capture(int device, void* stream) {
  set_device(device);
  check_runtime(cudaStreamBeginCapture(static_cast<cudaStream_t>(stream), cudaStreamCaptureModeThreadLocal),
                "cudaStreamBeginCapture");
  capturing_device = device;
  capturing_stream = stream;
}

void* end_capture(int device, void* stream, bool abandon) {
  set_device(device);
  capturing_device = -1;
  capturing_stream = nullptr;
  cudaGraph_t graph = nullptr;
  // An invalidated capture leaves its error behind as the thread's last error: cleared, so that
  // the next launch does not report it as its own.
  const cudaError_t ended = kernels::cuda::cleared(cudaStreamEndCapture(static_cast<cudaStream_t>(stream), &graph));
  if (graph != nullptr && (abandon || ended != cudaSuccess))
    report_runtime_failure(cudaGraphDestroy(graph), "cudaGraphDestroy (of a failed capture)");
  if (abandon) return nullptr;
  if (ended != cudaSuccess)
    throw Error(std::string("CUDA graph capture failed: ") + cudaGetErrorString(ended) +
                " (a call in the captured work synchronised with the host or used another stream without an event)");
  cudaGraphExec_t exec = nullptr;
  const cudaError_t instantiated = cudaGraphInstantiate(&exec, graph, 0);
  report_runtime_failure(cudaGraphDestroy(graph), "cudaGraphDestroy");  // the executable graph keeps what it needs
  check_runtime(instantiated, "cudaGraphInstantiate");
  return exec;
}

void launch_graph(int device, void* graph, void* stream) {
  set_device(device);
  check_runtime(cudaGraphLaunch(static_cast<cudaGraphExec_t>(graph), static_cast<cudaStream_t>(stream)),
                "cudaGraphLaunch");
}

void destroy_graph(void* graph) {
  if (graph != nullptr) report_runtime_failure(cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(graph)), "cudaGraphExecDestroy");
}

void* copy_stream(int device) { return stream_of(device, &DeviceState::copy_stream); }

}  // namespace cnn::cuda

namespace cnn {

namespace {
// The events of both CUDA caching allocators (device memory and pinned host memory): an event on
// `stream` of `device`, whether it has passed, the host waiting for it, and its end.
void* record_event_on(int device, void* stream) {
  cuda::set_device(device);
  cudaEvent_t e = nullptr;
  kernels::cuda::check_runtime(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreateWithFlags");
  const cudaError_t recorded = cudaEventRecord(e, static_cast<cudaStream_t>(stream));
  if (recorded != cudaSuccess) kernels::cuda::report_runtime_failure(cudaEventDestroy(e), "cudaEventDestroy");
  kernels::cuda::check_runtime(recorded, "cudaEventRecord");
  return e;
}

void use_cuda_events(CachingSystem& system) {
  system.event_done = [](void* e) { return kernels::cuda::event_passed(static_cast<cudaEvent_t>(e)); };
  system.wait_event = [](void* e) {
    kernels::cuda::check_runtime(cudaEventSynchronize(static_cast<cudaEvent_t>(e)), "cudaEventSynchronize");
  };
  system.destroy_event = [](void* e) {
    kernels::cuda::report_runtime_failure(cudaEventDestroy(static_cast<cudaEvent_t>(e)), "cudaEventDestroy");
  };
}

// A system allocation that found no memory answers null, cleared from the thread's last error
// (kernels/cuda/runtime_status.h), so that the caching allocator can give back its cache, retry,
// and then report out of memory; any other failure (a kernel's illegal address surfacing here, a
// lost device) is not a question of memory and says what it is.
void* null_when_out_of_memory(cudaError_t status, void* p, const char* call) {
  if (status == cudaErrorMemoryAllocation) {
    (void)kernels::cuda::cleared(status);
    return nullptr;
  }
  kernels::cuda::check_runtime(status, call);
  return p;
}

// Pinned host memory is one pool whatever the stream: its blocks carry this tag instead of a
// stream, so that a copy on any stream, the legacy default one (null) included, can be recorded.
char pinned_host_tag;
}  // namespace

Allocator& cuda_allocator(int index) {
  cuda::require_device(index);
  auto& ctx = cuda::context();
  std::lock_guard<std::mutex> lock(ctx.mutex);
  auto& s = ctx.devices[static_cast<size_t>(index)];
  if (!s.allocator) {
    CachingSystem system;
    system.alloc = [index](size_t bytes) -> void* {
      void* p = nullptr;
      cuda::set_device(index);
      // During a graph capture (new blocks for the graph's pool, the capture stream's cuBLAS
      // workspace) cudaMalloc is a call the capture mode forbids, though it enqueues nothing: it is
      // made in relaxed mode for this thread, as PyTorch's allocator does. The memory is not part
      // of the graph; the graph's pool keeps it for as long as the graph may use it.
      cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
      kernels::cuda::check_runtime(cudaThreadExchangeStreamCaptureMode(&mode), "cudaThreadExchangeStreamCaptureMode");
      const cudaError_t status = cudaMalloc(&p, bytes);
      kernels::cuda::check_runtime(cudaThreadExchangeStreamCaptureMode(&mode), "cudaThreadExchangeStreamCaptureMode");
      return null_when_out_of_memory(status, p, "cudaMalloc");
    };
    system.free = [index](void* p) {
      cuda::set_device(index);
      kernels::cuda::check_runtime(cudaFree(p), "cudaFree");
    };
    system.current_stream = [index] { return cuda::current_stream(index); };
    system.record_event = [index](void* stream) { return record_event_on(index, stream); };
    use_cuda_events(system);
    system.name = "cuda:" + std::to_string(index);
    system.free_memory = [index] { return cuda::memory_info(index).free; };
    s.allocator = std::make_unique<CachingAllocator>(std::move(system), cuda::allocator_options());
  }
  return *s.allocator;
}

Allocator& pinned_allocator() {
  // Never destroyed, like the device allocators: tensors in static objects may outlive it.
  static Allocator* allocator = []() -> Allocator* {
    if (!cuda::is_available()) return &cpu_allocator();
    CachingSystem system;
    system.alloc = [](size_t bytes) -> void* {
      void* p = nullptr;
      return null_when_out_of_memory(cudaHostAlloc(&p, bytes, cudaHostAllocDefault), p, "cudaHostAlloc");
    };
    system.free = [](void* p) { kernels::cuda::check_runtime(cudaFreeHost(p), "cudaFreeHost"); };
    system.current_stream = []() -> void* { return &pinned_host_tag; };
    system.record_event = [](void* stream) {
      int device = cuda::current_device();  // the legacy default stream's
      if (stream != nullptr)
        kernels::cuda::check_runtime(cudaStreamGetDevice(static_cast<cudaStream_t>(stream), &device),
                                     "cudaStreamGetDevice (a stream that used pinned host memory)");
      return record_event_on(device, stream);
    };
    use_cuda_events(system);
    system.name = "pinned host memory";
    // Only the caching switch applies: a host block is never split for another stream.
    CachingAllocator::Options options;
    options.caching = cuda::allocator_options().caching;
    return new CachingAllocator(std::move(system), options);
  }();
  return *allocator;
}

}  // namespace cnn

#else  // no CUDA in this build

namespace cnn::cuda {

namespace {
[[noreturn]] void unavailable(int device) {
  throw Error("a CUDA tensor was requested on cuda:" + std::to_string(device) +
              " but this build of cnn has no CUDA backend; rebuild with the CUDA toolkit installed "
              "(-DCNN_CUDA=ON) or use device = cpu");
}
}  // namespace

bool is_available() { return false; }
int device_count() { return 0; }
void require_device(int device) { unavailable(device); }
void set_device(int device) { unavailable(device); }
int current_device() { unavailable(0); }
void* current_stream(int device) { unavailable(device); }
void set_stream(int device, void*) { unavailable(device); }
void synchronize(int device) { unavailable(device); }
DeviceMemory memory_info(int device) { unavailable(device); }
void* cublas_handle(int device) { unavailable(device); }
Workspace cublas_workspace(int device) { unavailable(device); }
void* cudnn_handle(int device) { unavailable(device); }
void copy(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes) {
  if (dst_device.is_cuda() || src_device.is_cuda()) unavailable(dst_device.is_cuda() ? dst_device.index : src_device.index);
  graph_capture::copy_on_cpu(dst, src, bytes);
}
void copy_to_device_async(void*, const void*, size_t, void*) { unavailable(0); }
void* capture_stream(int device) { unavailable(device); }
void begin_capture(int device, void*) { unavailable(device); }
void* end_capture(int device, void*, bool) { unavailable(device); }
void launch_graph(int device, void*, void*) { unavailable(device); }
void destroy_graph(void*) {}
Event::Event(int device) : device_(device) { require_device(device); }
Event::~Event() = default;
void Event::record(void*) { require_device(device_); }
void Event::make_wait(void*) { require_device(device_); }
void Event::make_wait(int stream_device, void*) { require_device(stream_device); }
void Event::synchronize() { require_device(device_); }
bool Event::done() { return true; }
void* copy_stream(int device) {
  require_device(device);
  return nullptr;
}
void* take_stream(int device) { unavailable(device); }
void give_back_stream(int, void*) {}

}  // namespace cnn::cuda

namespace cnn {
Allocator& cuda_allocator(int index) {
  cuda::require_device(index);  // always throws in this build
  throw Error("unreachable");
}
Allocator& pinned_allocator() { return cpu_allocator(); }
}  // namespace cnn

#endif

namespace cnn::cuda {
namespace {
std::atomic<bool> benchmark_mode{false};
std::atomic<bool> deterministic_mode{false};
std::atomic<bool> tf32_mode{false};
}  // namespace
void set_allow_tf32(bool on) { tf32_mode = on; }
bool allow_tf32() { return tf32_mode; }
void set_cudnn_benchmark(bool on) { benchmark_mode = on; }
bool cudnn_benchmark() { return benchmark_mode; }
void set_cudnn_deterministic(bool on) { deterministic_mode = on; }
bool cudnn_deterministic() { return deterministic_mode; }
}  // namespace cnn::cuda
