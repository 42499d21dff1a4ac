// Host-to-device uploads on a copy stream, ordered against the compute stream with events (see
// async_copy.h).
#include "engine/async_copy.h"

#include <map>
#include <mutex>
#include <string>

#include "engine/config.h"
#include "engine/cuda_context.h"
#include "engine/error.h"

#if CNN_WITH_CUDA
#include <cuda_runtime.h>
#endif

namespace cnn {

#if CNN_WITH_CUDA
namespace cuda {
namespace {
void check(cudaError_t err, const char* what) {
  if (err != cudaSuccess) throw Error(std::string("CUDA ") + what + " failed: " + cudaGetErrorString(err));
}
}  // namespace

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
void Event::synchronize() { check(cudaEventSynchronize(static_cast<cudaEvent_t>(event_)), "cudaEventSynchronize"); }
bool Event::done() {
  const cudaError_t status = cudaEventQuery(static_cast<cudaEvent_t>(event_));
  if (status == cudaErrorNotReady) return false;
  check(status, "cudaEventQuery");
  return true;
}

void* copy_stream(int device) {
  static std::mutex mutex;
  static std::map<int, cudaStream_t> streams;  // one per device for the life of the process
  std::lock_guard<std::mutex> lock(mutex);
  auto it = streams.find(device);
  if (it != streams.end()) return it->second;
  set_device(device);
  cudaStream_t s = nullptr;
  check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  streams.emplace(device, s);
  return s;
}
}  // namespace cuda

Upload upload_async(const std::vector<Tensor>& host, Device device) {
  Upload up;
  up.device_ = device;
  if (!device.is_cuda()) {
    for (const Tensor& t : host) up.tensors.push_back(t.to(device));
    return up;
  }
  const int index = device.index;
  void* compute = cuda::current_stream(index);
  void* copies = cuda::copy_stream(index);
  for (const Tensor& t : host)
    CNN_CHECK(t.device().is_cpu(), "upload_async: the tensors must be in host memory, not ", t.device().str());
  // The new blocks may have been freed by compute-stream kernels still queued: copy after them.
  for (const Tensor& t : host) up.tensors.push_back(Tensor::empty(t.shape(), t.dtype(), device));
  cuda::Event compute_so_far(index);
  compute_so_far.record(compute);
  compute_so_far.make_wait(copies);
  for (size_t i = 0; i < host.size(); ++i)
    cuda::check(cudaMemcpyAsync(up.tensors[i].data(), host[i].data(), host[i].nbytes(), cudaMemcpyHostToDevice,
                                static_cast<cudaStream_t>(copies)),
                "cudaMemcpyAsync (upload)");
  up.copied_ = std::make_shared<cuda::Event>(index);
  up.copied_->record(copies);
  up.host_ = host;
  return up;
}
#else
namespace cuda {
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
}  // namespace cuda

Upload upload_async(const std::vector<Tensor>& host, Device device) {
  Upload up;
  up.device_ = device;
  for (const Tensor& t : host) up.tensors.push_back(t.to(device));  // a CUDA target explains what is missing
  return up;
}
#endif

void Upload::make_compute_wait() const {
  if (copied_) copied_->make_wait(cuda::current_stream(device_.index));
}
void Upload::wait_host() const {
  if (copied_) copied_->synchronize();
}
bool Upload::finished() const { return !copied_ || copied_->done(); }

}  // namespace cnn
