// Dispatch from an op to its CPU or CUDA kernel, for op implementations (engine/ops/*.cpp).
//
//   run_on(x.device(), [&] { kernels::cpu::f(...); },
//          [&](kernels::Stream s) { CNN_IF_CUDA(kernels::cuda::f(..., s)); });
//
// CNN_IF_CUDA keeps CUDA kernel calls out of builds without CUDA, where reaching it is an error
// (it cannot happen in practice: CUDA tensors cannot be created in such a build). By convention
// the stream parameter of the CUDA lambda is named `s`.
#pragma once
#include "engine/config.h"
#include "engine/cuda_context.h"
#include "engine/device.h"
#include "engine/error.h"

namespace cnn {

template <class CpuFn, class CudaFn>
void run_on(const Device& device, CpuFn&& cpu_fn, CudaFn&& cuda_fn) {
  if (device.is_cpu()) {
    cpu_fn();
  } else {
    cuda::set_device(device.index);
    cuda_fn(cuda::current_stream(device.index));
  }
}

}  // namespace cnn

#if CNN_WITH_CUDA
#define CNN_IF_CUDA(...) __VA_ARGS__
#else
#define CNN_IF_CUDA(...) ((void)s, throw ::cnn::Error("this build of cnn has no CUDA backend"))
#endif
