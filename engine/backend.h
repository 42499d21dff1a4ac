// The one dispatch point from the engine to the kernels: every call of a kernel of kernels/*.h goes
// through CNN_KERNEL (engine/ops, tensor fills, batch augmentation, the optimizer and loss-scale
// passes).
//
//   CNN_KERNEL(x.device(), softmax_forward, x.dtype(), x.data(), y.data(), rows, cols, log);
//
// calls kernels::cpu::softmax_forward(args..., nullptr) for a CPU device, and for a CUDA device
// makes it the current device, then calls kernels::cuda::softmax_forward(args..., stream) with the
// device's current stream. This works because both backends declare each kernel with the same
// signature, the stream last (the CPU kernels ignore it). Kernels backed by a CUDA library take its
// resources on both backends as well (cuDNN/cuBLAS handle, workspace, algorithm policy): the op
// gathers them for the device first (none on the CPU), then names the kernel once.
//
// In a build without CUDA the CUDA branch is not compiled (kernels::cuda does not exist there):
// reaching it throws the cnn::Error that says this build has no CUDA backend, which cannot happen in
// practice since no CUDA tensor can be created in such a build. CNN_IF_CUDA(...) keeps other code
// that names kernels::cuda (a workspace size) out of such builds in the same way: there it expands
// to nothing.
//
// While the calling thread captures CPU work for a graph (engine/graph.h), a CPU kernel call is
// recorded with its arguments instead of run; each replay of the graph runs it.
//
// Each call is also a span of the profiler (engine/profiler.h), named after the kernel: one branch
// on a flag while the profiler is off.
#pragma once
#include "engine/allocator.h"
#include "engine/config.h"
#include "engine/cuda_context.h"
#include "engine/device.h"
#include "engine/error.h"
#include "engine/graph.h"
#include "engine/profiler.h"

#include <tuple>

#define CNN_KERNEL(device, name, ...)                               \
  do {                                                              \
    const ::cnn::Device& cnn_kernel_device = (device);              \
    const ::cnn::profiler::Scope cnn_kernel_span(#name, ::cnn::profiler::Category::op, cnn_kernel_device); \
    if (cnn_kernel_device.is_cpu())                                 \
      CNN_KERNEL_ON_CPU_(name, __VA_ARGS__);                        \
    else                                                            \
      CNN_KERNEL_ON_CUDA_(cnn_kernel_device.index, name, __VA_ARGS__); \
  } while (0)

// A kernel that exists on the CPU only (kernels::cpu::name), in a profiler span of its name.
#define CNN_CPU_KERNEL(name, ...)                                                                      \
  do {                                                                                                \
    const ::cnn::profiler::Scope cnn_kernel_span(#name, ::cnn::profiler::Category::op, ::cnn::Device::cpu()); \
    CNN_KERNEL_ON_CPU_(name, __VA_ARGS__);                                                            \
  } while (0)

// The CPU call: run now, or recorded with its arguments (evaluated now, kept by value) while the
// thread captures CPU work for a graph (engine/graph.h).
#define CNN_KERNEL_ON_CPU_(name, ...)                                                              \
  ::cnn::graph_capture::run_on_cpu([cnn_kernel_args = std::make_tuple(__VA_ARGS__)] {               \
    std::apply([](const auto&... cnn_kernel_arg) { ::cnn::kernels::cpu::name(cnn_kernel_arg..., nullptr); }, \
               cnn_kernel_args);                                                                   \
  })

namespace cnn::detail {
// "softmax_forward on cuda:0: <what failed>", for CNN_KERNEL.
[[noreturn]] inline void rethrow_in_kernel(const char* kernel, int device, const Error& error) {
  throw Error(concat(kernel, " on cuda:", device, ": ", error.what()));
}
}  // namespace cnn::detail

#if CNN_WITH_CUDA
// A failure inside the CUDA kernel (a launch error, a library status) is re-thrown naming the
// kernel and the device; out of memory passes unchanged (its message already says what to do). A
// library that could not allocate memory of its own gets a second try after the device's cache
// was given back (run_with_library_memory_retry).
#define CNN_KERNEL_ON_CUDA_(index, name, ...)                                           \
  do {                                                                                  \
    try {                                                                               \
      ::cnn::cuda::set_device(index);                                                   \
      ::cnn::run_with_library_memory_retry([&]() -> ::cnn::Allocator& { return ::cnn::cuda_allocator(index); }, [&] { \
        ::cnn::kernels::cuda::name(__VA_ARGS__, ::cnn::cuda::current_stream(index));   \
      });                                                                               \
    } catch (const ::cnn::OutOfMemoryError&) {                                          \
      throw;                                                                            \
    } catch (const ::cnn::Error& cnn_kernel_error) {                                    \
      ::cnn::detail::rethrow_in_kernel(#name, index, cnn_kernel_error);                 \
    }                                                                                   \
  } while (0)
#define CNN_IF_CUDA(...) __VA_ARGS__
#else
#define CNN_KERNEL_ON_CUDA_(index, name, ...) ::cnn::cuda::require_device(index)  // throws: no CUDA backend
#define CNN_IF_CUDA(...) static_cast<void>(0)
#endif
