// CPU reference for the batch augmentation kernels (kernels/augment.h): plain loops, OpenMP over
// samples, the same per-sample draws and element functions as the CUDA kernels, so both backends
// produce the same crops and flips and the same values.
#include "kernels/augment.h"

#include <algorithm>

#include "kernels/common/any_dtype.h"

namespace cnn::kernels::cpu {

namespace {
template <class T>
void crop_flip_normalize_typed(const uint8_t* in, int64_t n, const CropFlipParams& p, const NormalizeParams& norm,
                               T* out) {
  const int64_t in_sample = static_cast<int64_t>(p.in_h) * p.in_w * p.channels;
  const int64_t out_sample = static_cast<int64_t>(p.out_h) * p.out_w * p.channels;
#pragma omp parallel for schedule(static)
  for (int64_t s = 0; s < n; ++s) {
    SampleRng rng(p.seed, p.epoch, p.first_sample + static_cast<uint64_t>(s), RngPurpose::batch_crop);
    const CropWindow w = draw_crop_window(p, rng);
    const uint8_t* sample = in + s * in_sample;
    T* dst = out + s * out_sample;
    for (int y = 0; y < p.out_h; ++y)
      for (int x = 0; x < p.out_w; ++x)
        for (int c = 0; c < p.channels; ++c) {
          const int64_t i = (static_cast<int64_t>(y) * p.out_w + x) * p.channels + c;
          store_normalized(dst, i, window_pixel(sample, p, w, y, x, c), norm, c);
        }
  }
}

}  // namespace

void crop_flip_normalize(const uint8_t* in, int64_t n, const CropFlipParams& params, const NormalizeParams& norm,
                         DType out_dt, void* out, Stream) {
  dispatch_augment_output(out_dt, [&](auto tag) {
    using T = decltype(tag);
    crop_flip_normalize_typed(in, n, params, norm, static_cast<T*>(out));
  });
}

void mixup(DType dt, void* x, int64_t n, int64_t sample_elems, float lam, Stream) {
  const int64_t pairs = n / 2;
#pragma omp parallel for schedule(static)
  for (int64_t k = 0; k < pairs; ++k)
    for (int64_t i = 0; i < sample_elems; ++i) {
      const int64_t ia = k * sample_elems + i, ib = (n - 1 - k) * sample_elems + i;
      float a = static_cast<float>(load_as_double(dt, x, ia)), b = static_cast<float>(load_as_double(dt, x, ib));
      mix_pair(a, b, lam);
      store_from_double(dt, x, ia, a);
      store_from_double(dt, x, ib, b);
    }
}

void cutmix(DType dt, void* x, int64_t n, int h, int w, int c, CutBox box, Stream) {
  const int64_t pairs = n / 2, sample = static_cast<int64_t>(h) * w * c;
  const int64_t element = dtype_size(dt);
  auto* bytes = static_cast<uint8_t*>(x);
#pragma omp parallel for schedule(static)
  for (int64_t k = 0; k < pairs; ++k)
    for (int y = box.y0; y < box.y1; ++y) {
      const int64_t row = (static_cast<int64_t>(y) * w + box.x0) * c;
      uint8_t* a = bytes + (k * sample + row) * element;
      uint8_t* b = bytes + ((n - 1 - k) * sample + row) * element;
      std::swap_ranges(a, a + static_cast<int64_t>(box.x1 - box.x0) * c * element, b);
    }
}

void mix_targets(const int64_t* labels, int64_t n, int64_t classes, float lam, float smoothing, float* targets, Stream) {
  const float off = smoothing / static_cast<float>(classes), on = 1.0f - smoothing + off;
  for (int64_t k = 0; k < n; ++k)
    for (int64_t j = 0; j < classes; ++j) {
      const float a = labels[k] == j ? on : off, b = labels[n - 1 - k] == j ? on : off;
      targets[k * classes + j] = lam * a + (1.0f - lam) * b;
    }
}

}  // namespace cnn::kernels::cpu
