// CUDA context: device discovery, per-device stream and cuBLAS handle, the device caching
// allocators and pinned host memory. Without CUDA every entry point explains that it is missing.
#include "engine/cuda_context.h"

#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "engine/allocator.h"
#include "engine/config.h"
#include "engine/error.h"

#if CNN_WITH_CUDA
#include <cublas_v2.h>
#include <cuda_runtime.h>
#endif

#if CNN_WITH_CUDA

namespace cnn::cuda {

namespace {
void check(cudaError_t err, const char* what) {
  if (err != cudaSuccess) throw Error(std::string("CUDA ") + what + " failed: " + cudaGetErrorString(err));
}

struct DeviceState {
  void* stream = nullptr;  // nullptr: the legacy default stream
  cublasHandle_t cublas = nullptr;
  std::unique_ptr<CachingAllocator> allocator;
};

struct Context {
  std::mutex mutex;
  int count = -1;
  std::string unavailable_reason;
  std::vector<DeviceState> devices;

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
    devices.resize(static_cast<size_t>(count));
  }
};

Context& context() {
  static Context* ctx = new Context();  // never destroyed: tensors may outlive static destructors
  return *ctx;
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

void* current_stream(int device) { return state(device).stream; }

void set_stream(int device, void* stream) { state(device).stream = stream; }

void synchronize(int device) {
  check(cudaSetDevice(device), "cudaSetDevice");
  check(cudaStreamSynchronize(static_cast<cudaStream_t>(current_stream(device))), "cudaStreamSynchronize");
}

void* cublas_handle(int device) {
  DeviceState& s = state(device);
  std::lock_guard<std::mutex> lock(context().mutex);
  if (!s.cublas) {
    check(cudaSetDevice(device), "cudaSetDevice");
    CNN_CHECK(cublasCreate(&s.cublas) == CUBLAS_STATUS_SUCCESS, "cublasCreate failed on cuda:", device);
  }
  return s.cublas;
}

void copy(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes) {
  if (bytes == 0) return;
  if (dst_device.is_cpu() && src_device.is_cpu()) {
    std::memcpy(dst, src, bytes);
    return;
  }
  const int device = dst_device.is_cuda() ? dst_device.index : src_device.index;
  check(cudaSetDevice(device), "cudaSetDevice");
  auto stream = static_cast<cudaStream_t>(current_stream(device));
  check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream), "cudaMemcpyAsync");
  if (dst_device.is_cpu() || src_device.is_cpu()) check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
}

}  // namespace cnn::cuda

namespace cnn {

Allocator& cuda_allocator(int index) {
  cuda::require_device(index);
  auto& ctx = cuda::context();
  std::lock_guard<std::mutex> lock(ctx.mutex);
  auto& s = ctx.devices[static_cast<size_t>(index)];
  if (!s.allocator) {
    s.allocator = std::make_unique<CachingAllocator>(
        [index](size_t bytes) -> void* {
          void* p = nullptr;
          cudaSetDevice(index);
          if (cudaMalloc(&p, bytes) != cudaSuccess) {
            cudaGetLastError();
            return nullptr;
          }
          return p;
        },
        [index](void* p) {
          cudaSetDevice(index);
          cudaFree(p);
        },
        [index] { return cuda::current_stream(index); });
  }
  return *s.allocator;
}

Allocator& pinned_allocator() {
  struct Pinned : Allocator {
    mutable std::mutex mutex;
    AllocatorStats s;
    void* allocate(size_t bytes) override {
      void* p = nullptr;
      if (cuda::is_available()) {
        if (cudaHostAlloc(&p, bytes ? bytes : 1, cudaHostAllocDefault) != cudaSuccess) p = nullptr;
      } else {
        p = std::aligned_alloc(64, (bytes + 63) / 64 * 64 + 64);
      }
      CNN_CHECK(p, "could not allocate ", bytes, " bytes of pinned host memory");
      std::lock_guard<std::mutex> lock(mutex);
      ++s.allocations;
      ++s.system_allocations;
      s.in_use += bytes;
      s.reserved += bytes;
      if (s.in_use > s.peak_in_use) s.peak_in_use = s.in_use;
      return p;
    }
    void deallocate(void* p, size_t bytes) override {
      if (cuda::is_available()) cudaFreeHost(p);
      else std::free(p);
      std::lock_guard<std::mutex> lock(mutex);
      s.in_use -= bytes;
      s.reserved -= bytes;
    }
    AllocatorStats stats() const override {
      std::lock_guard<std::mutex> lock(mutex);
      return s;
    }
    void reset_peak() override {
      std::lock_guard<std::mutex> lock(mutex);
      s.peak_in_use = s.in_use;
    }
  };
  static Pinned* allocator = new Pinned();
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
void* current_stream(int device) { unavailable(device); }
void set_stream(int device, void*) { unavailable(device); }
void synchronize(int device) { unavailable(device); }
void* cublas_handle(int device) { unavailable(device); }
void copy(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes) {
  if (dst_device.is_cuda() || src_device.is_cuda()) unavailable(dst_device.is_cuda() ? dst_device.index : src_device.index);
  if (bytes) std::memcpy(dst, src, bytes);
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
