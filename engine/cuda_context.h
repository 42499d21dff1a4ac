// The CUDA context of the engine: devices, the stream each device's work runs on, library handles.
// Everything here takes and returns plain pointers (a cudaStream_t is passed as void*) so that
// engine headers stay free of CUDA headers. On a build without CUDA, or a machine without a GPU,
// these functions raise a cnn::Error only when a CUDA device is actually asked for.
#pragma once
#include <cstddef>

#include "engine/device.h"

namespace cnn::cuda {

// True when the engine was built with CUDA and at least one device is usable.
bool is_available();
int device_count();
// Throws a cnn::Error that says why (no CUDA build, no driver, no such device) when `device`
// cannot be used.
void require_device(int device);

// Makes `device` the calling thread's current CUDA device (a no-op when it already is); every op
// on a CUDA tensor does this before launching, so tensors on several devices can be mixed per op.
void set_device(int device);
int current_device();

// The stream the engine enqueues device `device`'s work on: the legacy default stream unless a
// caller installed their own with set_stream (pass nullptr to go back to the default). For the
// thread that captures a graph on the device, its capture stream while the capture lasts.
void* current_stream(int device);
void set_stream(int device, void* stream);
void synchronize(int device);

// Device memory as the driver reports it (cudaMemGetInfo): free and total bytes. Memory that the
// engine's caching allocator holds but does not use is not in `free`; add it from its stats.
struct DeviceMemory {
  size_t free = 0;
  size_t total = 0;
};
DeviceMemory memory_info(int device);

// cublasHandle_t of the device, bound to its current stream by each GEMM call.
void* cublas_handle(int device);
// The cuBLAS workspace of the device's current stream: 32 MiB from the device's caching allocator
// (so GPU memory statistics include it), one per stream, kept for the life of the process.
struct Workspace {
  void* data = nullptr;
  size_t bytes = 0;
};
Workspace cublas_workspace(int device);

// cudnnHandle_t of the device, bound to its current stream by each convolution.
void* cudnn_handle(int device);
// Measured ("find") algorithm choice for convolutions instead of cuDNN's heuristic, like
// torch.backends.cudnn.benchmark. Off by default; a process-wide setting.
void set_cudnn_benchmark(bool on);
bool cudnn_benchmark();
// Deterministic convolution algorithms only (bitwise-equal results run to run, sometimes slower),
// like torch.backends.cudnn.deterministic. Off by default; a process-wide setting. The project's own
// kernels are deterministic in any case (fixed-order reductions, no atomics).
void set_cudnn_deterministic(bool on);
bool cudnn_deterministic();

// TF32 tensor-core math for f32 convolutions (cuDNN) and GEMMs (cuBLAS): one policy for both, like
// torch.backends.cudnn.allow_tf32 and torch.backends.cuda.matmul.allow_tf32 set together. Off by
// default: f32 work then runs FMA math (cuDNN's CUDNN_FMA_MATH, cuBLAS's CUBLAS_COMPUTE_32F), exact
// to f32 rounding; on, products keep 10 mantissa bits (about 1e-3 relative per product) for up to
// 8x the f32 throughput on Ampere and later. NVIDIA_TF32_OVERRIDE=0 in the environment turns TF32
// off below both libraries whatever this says. A process-wide setting.
void set_allow_tf32(bool on);
bool allow_tf32();

// Copies bytes between any two devices; returns when a copy to host memory has landed.
void copy(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes);
// Enqueues a host-to-device copy on `stream` and returns at once (truly asynchronous from pinned
// memory); the host memory must stay valid until the copy has run (see engine/async_copy.h).
void copy_to_device_async(void* dst, const void* host_src, size_t bytes, void* stream);

// A CUDA event on one device (timing disabled). Without CUDA, constructing one is a cnn::Error.
class Event {
 public:
  explicit Event(int device);
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  void record(void* stream);      // marks the work enqueued on `stream` (of the event's device) so far
  void make_wait(void* stream);   // work enqueued on `stream` (of the event's device) from now on waits for the mark
  // The same for a stream of another device: a null stream is the legacy default stream of
  // whichever device is current, so the stream's device is named.
  void make_wait(int stream_device, void* stream);
  void synchronize();             // the host waits for the mark
  bool done();                    // whether the mark has passed (no waiting)

 private:
  int device_;
  void* event_ = nullptr;
};

// CUDA graphs (engine/graph.h). The device's capture stream: created on first use, non-blocking,
// the stream work is captured on (the legacy default stream cannot be).
void* capture_stream(int device);
// Starts capturing the work the calling thread enqueues on `stream` (cudaStreamBeginCapture in
// thread-local mode: CUDA refuses this thread's calls that could synchronise while it lasts), and
// makes `stream` this thread's current stream of the device (other threads keep theirs) until
// end_capture.
void begin_capture(int device, void* stream);
// Ends the capture on `stream` and instantiates it: the executable graph (a cudaGraphExec_t),
// destroyed by destroy_graph. A capture that CUDA invalidated is a cnn::Error with its reason.
// With `abandon` the capture is ended and discarded (after a failure in the captured work); the
// result is null and nothing throws.
void* end_capture(int device, void* stream, bool abandon = false);
// Enqueues the executable graph on `stream`: the captured work, with its captured arguments.
void launch_graph(int device, void* graph, void* stream);
void destroy_graph(void* graph);

// The device's copy stream: created on first use, non-blocking with respect to the legacy default
// stream, used for host-to-device uploads only.
void* copy_stream(int device);

// A non-blocking stream of `device` for one user's own ordered work (the NCCL communicator's
// collectives), which gives it back when it is gone. Streams are never destroyed, as PyTorch keeps
// its streams for the life of the process: the caching allocator records events on a stream a block
// was used on (record_stream) when the block is freed, which may be after the stream's user has
// gone. A stream given back is handed to the next user.
void* take_stream(int device);
void give_back_stream(int device, void* stream);

}  // namespace cnn::cuda
