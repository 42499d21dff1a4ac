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
#endif

#if CNN_WITH_CUDA

namespace cnn::cuda {

namespace {
void check(cudaError_t err, const char* what) {
  if (err != cudaSuccess) throw Error(std::string("CUDA ") + what + " failed: " + cudaGetErrorString(err));
}

struct DeviceState {
  std::atomic<void*> stream{nullptr};  // nullptr: the legacy default stream; read by loader threads too
  cublasHandle_t cublas = nullptr;
  cudaStream_t copy_stream = nullptr;  // host-to-device uploads (engine/async_copy.h), kept for the process
  cudaStream_t capture_stream = nullptr;  // CUDA graph captures (engine/graph.h), kept for the process
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
      cudaGetLastError();  // clear the sticky error
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

// PyTorch's PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:N, as CNN_CUDA_MAX_SPLIT_MB=N.
CachingAllocator::Options allocator_options() {
  CachingAllocator::Options options;
  if (const char* mb = std::getenv("CNN_CUDA_MAX_SPLIT_MB")) {
    char* end = nullptr;
    const unsigned long long value = std::strtoull(mb, &end, 10);
    CNN_CHECK(end != mb && *end == '\0' && value > 0, "CNN_CUDA_MAX_SPLIT_MB=", mb,
              " is not a positive number of MiB; unset it or give e.g. 512 (more than 20)");
    options.max_split_bytes = static_cast<size_t>(value) << 20;
  }
  return options;
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
  check(cudaSetDevice(device), "cudaSetDevice");
}

int current_device() {
  int device = 0;
  check(cudaGetDevice(&device), "cudaGetDevice");
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
  check(cudaStreamSynchronize(static_cast<cudaStream_t>(current_stream(device))), "cudaStreamSynchronize");
}

DeviceMemory memory_info(int device) {
  set_device(device);
  DeviceMemory m;
  check(cudaMemGetInfo(&m.free, &m.total), "cudaMemGetInfo");
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
    // source's memory once it is freed) waits for the copy.
    Event source_ready(src_device.index);
    source_ready.record(current_stream(src_device.index));
    auto stream = static_cast<cudaStream_t>(current_stream(dst_device.index));
    source_ready.make_wait(stream);
    set_device(dst_device.index);
    check(cudaMemcpyPeerAsync(dst, dst_device.index, src, src_device.index, bytes, stream),
          ("cudaMemcpyPeerAsync of " + format_bytes(static_cast<double>(bytes)) + " from " + src_device.str() + " to " +
           dst_device.str())
              .c_str());
    Event copied(dst_device.index);
    copied.record(stream);
    copied.make_wait(current_stream(src_device.index));
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
  check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream), what("cudaMemcpyAsync").c_str());
  if (dst_device.is_cpu() || src_device.is_cpu())
    check(cudaStreamSynchronize(stream), what("cudaStreamSynchronize after the cudaMemcpyAsync").c_str());
}

void copy_to_device_async(void* dst, const void* host_src, size_t bytes, void* stream) {
  check(cudaMemcpyAsync(dst, host_src, bytes, cudaMemcpyHostToDevice, static_cast<cudaStream_t>(stream)),
        ("cudaMemcpyAsync of " + format_bytes(static_cast<double>(bytes)) + " from pinned host memory to the device")
            .c_str());
}

Event::Event(int device) : device_(device) {
  set_device(device);
  cudaEvent_t e = nullptr;
  check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreateWithFlags");
  event_ = e;
}
Event::~Event() {
  if (event_ != nullptr) cudaEventDestroy(static_cast<cudaEvent_t>(event_));
}
void Event::record(void* stream) {
  set_device(device_);
  check(cudaEventRecord(static_cast<cudaEvent_t>(event_), static_cast<cudaStream_t>(stream)), "cudaEventRecord");
}
void Event::make_wait(void* stream) {
  set_device(device_);
  check(cudaStreamWaitEvent(static_cast<cudaStream_t>(stream), static_cast<cudaEvent_t>(event_), 0), "cudaStreamWaitEvent");
}
void Event::synchronize() {
  host_sync_point("an event synchronisation");
  check(cudaEventSynchronize(static_cast<cudaEvent_t>(event_)), "cudaEventSynchronize");
}
bool Event::done() {
  const cudaError_t status = cudaEventQuery(static_cast<cudaEvent_t>(event_));
  if (status == cudaErrorNotReady) return false;
  check(status, "cudaEventQuery");
  return true;
}

namespace {
// A non-blocking stream of the device kept in `member` of its state, created on first use.
void* stream_of(int device, cudaStream_t DeviceState::*member) {
  DeviceState& s = state(device);
  std::lock_guard<std::mutex> lock(context().mutex);
  if (!(s.*member)) {
    set_device(device);
    check(cudaStreamCreateWithFlags(&(s.*member), cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  }
  return s.*member;
}
}  // namespace

void* capture_stream(int device) { return stream_of(device, &DeviceState::capture_stream); }

void begin_capture(int device, void* stream) {
  set_device(device);
  check(cudaStreamBeginCapture(static_cast<cudaStream_t>(stream), cudaStreamCaptureModeThreadLocal),
        "cudaStreamBeginCapture");
  capturing_device = device;
  capturing_stream = stream;
}

void* end_capture(int device, void* stream, bool abandon) {
  set_device(device);
  capturing_device = -1;
  capturing_stream = nullptr;
  cudaGraph_t graph = nullptr;
  const cudaError_t ended = cudaStreamEndCapture(static_cast<cudaStream_t>(stream), &graph);
  if (abandon) {
    if (graph != nullptr) cudaGraphDestroy(graph);
    cudaGetLastError();  // an invalidated capture leaves its error behind
    return nullptr;
  }
  if (ended != cudaSuccess) {
    if (graph != nullptr) cudaGraphDestroy(graph);
    cudaGetLastError();
    throw Error(std::string("CUDA graph capture failed: ") + cudaGetErrorString(ended) +
                " (a call in the captured work synchronised with the host or used another stream without an event)");
  }
  cudaGraphExec_t exec = nullptr;
  const cudaError_t instantiated = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);  // the executable graph keeps what it needs
  check(instantiated, "cudaGraphInstantiate");
  return exec;
}

void launch_graph(int device, void* graph, void* stream) {
  set_device(device);
  check(cudaGraphLaunch(static_cast<cudaGraphExec_t>(graph), static_cast<cudaStream_t>(stream)), "cudaGraphLaunch");
}

void destroy_graph(void* graph) {
  if (graph != nullptr) cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(graph));
}

void* copy_stream(int device) { return stream_of(device, &DeviceState::copy_stream); }

}  // namespace cnn::cuda

namespace cnn {

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
      cudaThreadExchangeStreamCaptureMode(&mode);
      const cudaError_t status = cudaMalloc(&p, bytes);
      cudaThreadExchangeStreamCaptureMode(&mode);
      if (status == cudaErrorMemoryAllocation) {
        cudaGetLastError();  // out of memory is not sticky: clear it so later calls do not see it
        return nullptr;      // the caching allocator frees its cache and retries, then reports it
      }
      // Anything else (a kernel's illegal address surfacing here, a lost device) is not a question of
      // memory: say what it is rather than "out of memory".
      cuda::check(status, "cudaMalloc");
      return p;
    };
    system.free = [index](void* p) {
      cuda::set_device(index);
      cudaFree(p);
    };
    system.current_stream = [index] { return cuda::current_stream(index); };
    system.record_event = [index](void* stream) -> void* {
      cuda::set_device(index);
      cudaEvent_t e = nullptr;
      cuda::check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreateWithFlags");
      cuda::check(cudaEventRecord(e, static_cast<cudaStream_t>(stream)), "cudaEventRecord");
      return e;
    };
    system.event_done = [](void* e) {
      const cudaError_t status = cudaEventQuery(static_cast<cudaEvent_t>(e));
      if (status == cudaErrorNotReady) return false;
      cuda::check(status, "cudaEventQuery");
      return true;
    };
    system.wait_event = [](void* e) { cuda::check(cudaEventSynchronize(static_cast<cudaEvent_t>(e)), "cudaEventSynchronize"); };
    system.destroy_event = [](void* e) { cudaEventDestroy(static_cast<cudaEvent_t>(e)); };
    system.name = "cuda:" + std::to_string(index);
    system.free_memory = [index] { return cuda::memory_info(index).free; };
    s.allocator = std::make_unique<CachingAllocator>(std::move(system), cuda::allocator_options());
  }
  return *s.allocator;
}

Allocator& pinned_allocator() {
  static HostAllocator* allocator = new HostAllocator(
      [](size_t bytes) -> void* {
        if (!cuda::is_available()) return std::aligned_alloc(64, (bytes + 63) / 64 * 64 + 64);
        void* p = nullptr;
        return cudaHostAlloc(&p, bytes ? bytes : 1, cudaHostAllocDefault) == cudaSuccess ? p : nullptr;
      },
      [](void* p) {
        if (cuda::is_available()) cudaFreeHost(p);
        else std::free(p);
      });
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
void Event::synchronize() { require_device(device_); }
bool Event::done() { return true; }
void* copy_stream(int device) {
  require_device(device);
  return nullptr;
}

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
