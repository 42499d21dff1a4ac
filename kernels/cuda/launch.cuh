// The launch vocabulary shared by every custom kernel file. Under nvcc it is plain CUDA; with
// CNN_CUDA_EMULATION it maps onto the host emulation (emulation.h), so the same kernel source runs
// on the CPU in tests, also under ThreadSanitizer and AddressSanitizer.
//
// Kernels may use: threadIdx/blockIdx/blockDim/gridDim, __syncthreads, static __shared__ arrays,
// atomicAdd, and the helpers below. No inline PTX, no dynamic shared memory, no warp intrinsics.
#pragma once
#include <cstdint>

#include "kernels/common/error.h"

#ifdef CNN_CUDA_EMULATION
#include "kernels/cuda/emulation.h"
#else
#include <cuda_runtime.h>
#endif

namespace cnn::kernels::cuda {

#ifdef CNN_CUDA_EMULATION
// Small grids and blocks under emulation: every CUDA thread is a host thread and every barrier a
// round of context switches on a few cores. Grid-stride loops and shared-memory trees still run
// with several blocks and several levels.
constexpr int64_t kMaxBlocks = 3;
constexpr int kBlockThreads = 64;
#else
constexpr int64_t kMaxBlocks = 65535;
constexpr int kBlockThreads = 256;  // threads per block of the 1-D kernels
inline void check_launch(const char* kernel) {
  const cudaError_t err = cudaGetLastError();
  CNN_CHECK(err == cudaSuccess, "CUDA kernel ", kernel, " failed to launch: ", cudaGetErrorString(err),
            " (an earlier asynchronous CUDA error can surface here: rerun with CUDA_LAUNCH_BLOCKING=1 to find it)");
}
#endif

// Blocks for a grid-stride loop over n elements with `threads` threads per block.
inline unsigned grid_for(int64_t n, int threads) {
  int64_t blocks = (n + threads - 1) / threads;
  if (blocks < 1) blocks = 1;
  if (blocks > kMaxBlocks) blocks = kMaxBlocks;
  return static_cast<unsigned>(blocks);
}

}  // namespace cnn::kernels::cuda

#ifdef CNN_CUDA_EMULATION
#define CNN_LAUNCH(kernel, grid, block, stream, ...) \
  ((void)(stream), ::cnn::emu::launch(kernel, dim3(grid), dim3(block), __VA_ARGS__))
#else
#define CNN_LAUNCH(kernel, grid, block, stream, ...)                                 \
  do {                                                                               \
    kernel<<<dim3(grid), dim3(block), 0, static_cast<cudaStream_t>(stream)>>>(__VA_ARGS__); \
    ::cnn::kernels::cuda::check_launch(#kernel);                                     \
  } while (0)
#endif

// Index of this thread in a 1-D grid, and the grid-stride step.
#define CNN_GLOBAL_INDEX (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x)
#define CNN_GRID_STRIDE (static_cast<int64_t>(gridDim.x) * blockDim.x)
