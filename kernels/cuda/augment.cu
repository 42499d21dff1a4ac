// Batch augmentation CUDA kernels (kernels/augment.h), from uint8 NHWC batches on the device.
// How: crop_flip_normalize runs a 2-D grid, y over samples and x over a sample's output elements;
// thread 0 of each block draws the sample's window (SampleRng, the same draws as the CPU reference)
// into shared memory, then the block's threads write their elements in a grid-stride loop. mixup
// and cutmix visit each pair (k, n-1-k) once and update both samples in place, so no second buffer
// is needed; mix_targets writes one element per thread.
// Memory traffic: crop_flip_normalize reads the window's bytes once (n out_h out_w c bytes, cached
// rows) and writes n out_h out_w c output elements; mixup reads and writes every element once;
// cutmix reads and writes the box of every sample once; mix_targets writes n classes floats.
#include <cstddef>

#include "kernels/augment.h"
#include "kernels/common/any_dtype.h"
#include "kernels/cuda/launch.cuh"

namespace cnn::kernels::cuda {

namespace {
constexpr int kThreads = kBlockThreads;

template <class T>
__global__ void crop_flip_normalize_kernel(const uint8_t* in, CropFlipParams p, NormalizeParams norm, T* out) {
  __shared__ CropWindow window;
  const int64_t s = blockIdx.y;
  if (threadIdx.x == 0) {
    SampleRng rng(p.seed, p.epoch, p.first_sample + static_cast<uint64_t>(s), RngPurpose::batch_crop);
    window = draw_crop_window(p, rng);
  }
  __syncthreads();
  const CropWindow w = window;
  const int64_t out_sample = static_cast<int64_t>(p.out_h) * p.out_w * p.channels;
  const uint8_t* sample = in + s * static_cast<int64_t>(p.in_h) * p.in_w * p.channels;
  T* dst = out + s * out_sample;
  for (int64_t i = CNN_GLOBAL_INDEX; i < out_sample; i += CNN_GRID_STRIDE) {
    const int c = static_cast<int>(i % p.channels);
    const int64_t pixel = i / p.channels;
    const int x = static_cast<int>(pixel % p.out_w), y = static_cast<int>(pixel / p.out_w);
    store_normalized(dst, i, window_pixel(sample, p, w, y, x, c), norm, c);
  }
}

__global__ void mixup_kernel(DType dt, void* x, int64_t n, int64_t sample_elems, float lam) {
  const int64_t total = n / 2 * sample_elems;
  for (int64_t i = CNN_GLOBAL_INDEX; i < total; i += CNN_GRID_STRIDE) {
    const int64_t k = i / sample_elems, j = i % sample_elems;
    const int64_t ia = k * sample_elems + j, ib = (n - 1 - k) * sample_elems + j;
    float a = static_cast<float>(load_as_double(dt, x, ia)), b = static_cast<float>(load_as_double(dt, x, ib));
    mix_pair(a, b, lam);
    store_from_double(dt, x, ia, a);
    store_from_double(dt, x, ib, b);
  }
}

template <class U>  // an unsigned type of the element's size: the swap moves bits, whatever the dtype
__global__ void cutmix_kernel(U* x, int64_t n, int h, int w, int c, CutBox box) {
  const int64_t box_w = static_cast<int64_t>(box.x1 - box.x0) * c;
  const int64_t per_sample = static_cast<int64_t>(box.y1 - box.y0) * box_w;
  const int64_t total = n / 2 * per_sample, sample = static_cast<int64_t>(h) * w * c;
  for (int64_t i = CNN_GLOBAL_INDEX; i < total; i += CNN_GRID_STRIDE) {
    const int64_t k = i / per_sample, r = i % per_sample;
    const int64_t offset = (static_cast<int64_t>(box.y0 + r / box_w) * w + box.x0) * c + r % box_w;
    U* a = x + k * sample + offset;
    U* b = x + (n - 1 - k) * sample + offset;
    const U t = *a;
    *a = *b;
    *b = t;
  }
}

__global__ void mix_targets_kernel(const int64_t* labels, int64_t n, int64_t classes, float lam, float smoothing,
                                   float* targets) {
  const float off = smoothing / static_cast<float>(classes), on = 1.0f - smoothing + off;
  for (int64_t i = CNN_GLOBAL_INDEX; i < n * classes; i += CNN_GRID_STRIDE) {
    const int64_t k = i / classes, j = i % classes;
    const float a = labels[k] == j ? on : off, b = labels[n - 1 - k] == j ? on : off;
    targets[i] = lam * a + (1.0f - lam) * b;
  }
}

template <class U>
void launch_cutmix(void* x, int64_t n, int h, int w, int c, CutBox box, Stream stream) {
  const int64_t total = n / 2 * static_cast<int64_t>(box.y1 - box.y0) * (box.x1 - box.x0) * c;
  if (total <= 0) return;
  CNN_LAUNCH(cutmix_kernel<U>, grid_for(total, kThreads), kThreads, stream, static_cast<U*>(x), n, h, w, c, box);
}
}  // namespace

void crop_flip_normalize(const uint8_t* in, int64_t n, const CropFlipParams& params, const NormalizeParams& norm,
                         DType out_dt, void* out, Stream stream) {
  if (n == 0) return;
  const int64_t out_sample = static_cast<int64_t>(params.out_h) * params.out_w * params.channels;
  const dim3 grid(grid_for(out_sample, kThreads), static_cast<unsigned>(n));
  dispatch_augment_output(out_dt, [&](auto tag) {
    using T = decltype(tag);
    CNN_LAUNCH(crop_flip_normalize_kernel<T>, grid, kThreads, stream, in, params, norm, static_cast<T*>(out));
  });
}

void mixup(DType dt, void* x, int64_t n, int64_t sample_elems, float lam, Stream stream) {
  const int64_t total = n / 2 * sample_elems;
  if (total == 0) return;
  CNN_LAUNCH(mixup_kernel, grid_for(total, kThreads), kThreads, stream, dt, x, n, sample_elems, lam);
}

void cutmix(DType dt, void* x, int64_t n, int h, int w, int c, CutBox box, Stream stream) {
  switch (dtype_size(dt)) {
    case 1: launch_cutmix<uint8_t>(x, n, h, w, c, box, stream); return;
    case 2: launch_cutmix<uint16_t>(x, n, h, w, c, box, stream); return;
    case 4: launch_cutmix<uint32_t>(x, n, h, w, c, box, stream); return;
    default: launch_cutmix<unsigned long long>(x, n, h, w, c, box, stream); return;
  }
}

void mix_targets(const int64_t* labels, int64_t n, int64_t classes, float lam, float smoothing, float* targets,
                 Stream stream) {
  if (n * classes == 0) return;
  CNN_LAUNCH(mix_targets_kernel, grid_for(n * classes, kThreads), kThreads, stream, labels, n, classes, lam, smoothing,
             targets);
}

}  // namespace cnn::kernels::cuda
