// The one way the host code checks CUDA runtime return codes (the engine's CUDA context, its events
// and the NCCL communicator; cuBLAS and cuDNN statuses are library_status.h's). Library-call files
// only: kernel files (.cu) check their launches with check_launch (launch.cuh).
//
// Note [the thread's last error]: a runtime call that fails also leaves its status behind as the
// calling thread's "last error", and the next kernel launch's check (cudaGetLastError in
// check_launch) would report it as that kernel's failure. cudaEventQuery and cudaStreamQuery answer
// cudaErrorNotReady for work still running, an expected answer and not a failure; a cudaMalloc or
// cudaHostAlloc that finds no memory is retried or reported as out of memory. So every status the
// host code looks at and handles itself is cleared here, as PyTorch's CUDAEvent::query and caching
// allocator do. A sticky error (an illegal address in a kernel) is not cleared by this: every later
// call reports it again.
#pragma once
#include <cuda_runtime.h>

#include <cstdio>
#include <string>

#include "kernels/common/error.h"

namespace cnn::kernels::cuda {

// Returns `status` after clearing it from the thread's last error (see the note above).
inline cudaError_t cleared(cudaError_t status) {
  if (status != cudaSuccess) (void)cudaGetLastError();
  return status;
}

// Throws a cnn::Error "CUDA <call> failed: <reason>" when `status` is not cudaSuccess; `call` names
// the runtime function and what it was doing, e.g. "cudaEventRecord (the copy stream's upload)".
inline void check_runtime(cudaError_t status, const std::string& call) {
  if (cleared(status) != cudaSuccess)
    throw Error("CUDA " + call + " failed: " + cudaGetErrorString(status) +
                " (an earlier asynchronous CUDA error can surface here: rerun with CUDA_LAUNCH_BLOCKING=1 to find it)");
}

// For destructors and other paths that must not throw: a failure is printed (the device is most
// likely broken, and the next checked call reports it too) and cleared.
inline void report_runtime_failure(cudaError_t status, const char* call) noexcept {
  if (cleared(status) != cudaSuccess) std::fprintf(stderr, "cnn: CUDA %s failed: %s\n", call, cudaGetErrorString(status));
}

// Whether the work before `event` has run (cudaEventQuery; never waits). Not ready is an answer,
// cleared from the thread's last error; any other failure throws.
inline bool event_passed(cudaEvent_t event) {
  const cudaError_t status = cudaEventQuery(event);
  if (status == cudaErrorNotReady) {
    (void)cudaGetLastError();
    return false;
  }
  check_runtime(status, "cudaEventQuery");
  return true;
}

}  // namespace cnn::kernels::cuda
