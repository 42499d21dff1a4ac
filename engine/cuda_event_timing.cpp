// Timed CUDA events (see cuda_event_timing.h).
#include "engine/cuda_event_timing.h"

#include <string>

#include "engine/config.h"
#include "engine/cuda_context.h"
#include "engine/error.h"
#include "engine/host_sync_check.h"

#if CNN_WITH_CUDA
#include <cuda_runtime.h>

#include "kernels/cuda/runtime_status.h"

namespace cnn::cuda {

namespace {
void check(cudaError_t err, const char* what) {
  kernels::cuda::check_runtime(err, std::string(what) + " of a timed event of the profiler");
}
}  // namespace

TimedEvent::TimedEvent(int device) : device_(device) {
  set_device(device);
  cudaEvent_t e = nullptr;
  check(cudaEventCreate(&e), "cudaEventCreate");
  event_ = e;
}
TimedEvent::~TimedEvent() {
  if (event_ != nullptr)
    kernels::cuda::report_runtime_failure(cudaEventDestroy(static_cast<cudaEvent_t>(event_)), "cudaEventDestroy of a timed event");
}
void TimedEvent::record(void* stream) {
  set_device(device_);
  check(cudaEventRecord(static_cast<cudaEvent_t>(event_), static_cast<cudaStream_t>(stream)), "cudaEventRecord");
}
void TimedEvent::synchronize() {
  host_sync_point("a timing event's synchronisation");
  check(cudaEventSynchronize(static_cast<cudaEvent_t>(event_)), "cudaEventSynchronize");
}
double TimedEvent::elapsed_ms(const TimedEvent& start, const TimedEvent& end) {
  float ms = 0;
  check(cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(start.event_), static_cast<cudaEvent_t>(end.event_)),
        "cudaEventElapsedTime");
  return ms;
}

}  // namespace cnn::cuda

#else

namespace cnn::cuda {
TimedEvent::TimedEvent(int device) : device_(device) { require_device(device); }
TimedEvent::~TimedEvent() = default;
void TimedEvent::record(void*) { require_device(device_); }
void TimedEvent::synchronize() { require_device(device_); }
double TimedEvent::elapsed_ms(const TimedEvent& start, const TimedEvent&) {
  require_device(start.device_);
  return 0;
}
}  // namespace cnn::cuda

#endif
