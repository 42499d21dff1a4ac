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
inline void check_launch(const char* kernel, dim3 grid, dim3 block) {
  const cudaError_t err = cudaGetLastError();
  CNN_CHECK(err == cudaSuccess, "CUDA kernel ", kernel, " (grid ", grid.x, "x", grid.y, "x", grid.z, ", block ", block.x, "x",
            block.y, "x", block.z, ") failed to launch: ", cudaGetErrorString(err),
            " (an earlier asynchronous CUDA error can surface here: rerun with CUDA_LAUNCH_BLOCKING=1 to find it)");
}
#endif

// Streaming multiprocessors of the device, read once from its attributes (the first device a kernel
// runs on; the machines this engine targets hold identical GPUs). Under emulation a small fixed
// number, so that the two-stage reductions still split their rows.
#ifdef CNN_CUDA_EMULATION
inline int sm_count() { return 2; }
#else
inline int sm_count() {
  static const int count = [] {
    int device = 0, sms = 0;
    if (cudaGetDevice(&device) != cudaSuccess ||
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess || sms < 1) {
      (void)cudaGetLastError();  // clear the error: fall back to an H100/H200's count
      sms = 132;
    }
    return sms;
  }();
  return count;
}
#endif

// Blocks that fill the device: 4 per SM keeps every SM busy while the others' blocks wait on memory.
inline int64_t filling_blocks() { return 4 * static_cast<int64_t>(sm_count()); }

// How many parts to split `rows` into so that `blocks_per_split` x parts blocks fill the device,
// each part keeping at least `min_rows` rows (so the partial results stay small against the input),
// and at most kMaxRowSplits parts (the second, fixed-order pass adds that many per output).
constexpr int64_t kMaxRowSplits = 1024;
inline int64_t row_splits(int64_t rows, int64_t blocks_per_split, int64_t min_rows) {
  int64_t splits = (filling_blocks() + blocks_per_split - 1) / (blocks_per_split < 1 ? 1 : blocks_per_split);
  const int64_t most = (rows + min_rows - 1) / (min_rows < 1 ? 1 : min_rows);
  if (splits > most) splits = most;
  if (splits > kMaxRowSplits) splits = kMaxRowSplits;
  return splits < 1 ? 1 : splits;
}

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
    ::cnn::kernels::cuda::check_launch(#kernel, dim3(grid), dim3(block));            \
  } while (0)
#endif

// Index of this thread in a 1-D grid, and the grid-stride step.
#define CNN_GLOBAL_INDEX (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x)
#define CNN_GRID_STRIDE (static_cast<int64_t>(gridDim.x) * blockDim.x)
