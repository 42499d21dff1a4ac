// Two deliberately broken kernels, compiled only into the sanitizer demo: a block reduction that
// forgot the barrier between its steps (a data race ThreadSanitizer reports) and a kernel that
// writes one element past its buffer (AddressSanitizer reports a heap-buffer-overflow).
#include "kernels/cuda/launch.cuh"

namespace cnn::kernels::cuda::broken {

constexpr int kThreads = 64;

__global__ void sum_without_barrier(const float* x, float* out) {
  __shared__ float scratch[kThreads];
  const unsigned t = threadIdx.x;
  scratch[t] = x[t];
  __syncthreads();
  for (unsigned stride = kThreads / 2; stride > 0; stride >>= 1) {
    if (t < stride) scratch[t] += scratch[t + stride];
    // missing: __syncthreads();
  }
  if (t == 0) *out = scratch[0];
}

__global__ void write_one_past_the_end(float* y, int n) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i <= n) y[i] = 1.0f;  // should be i < n
}

float run_race() {
  float x[kThreads], out = 0;
  for (int i = 0; i < kThreads; ++i) x[i] = 1.0f;
  CNN_LAUNCH(sum_without_barrier, 1, kThreads, nullptr, x, &out);
  return out;
}

void run_overflow() {
  float* y = new float[32];
  CNN_LAUNCH(write_one_past_the_end, 1, 64, nullptr, y, 32);
  delete[] y;
}

}  // namespace cnn::kernels::cuda::broken
