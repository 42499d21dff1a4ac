// Batch augmentation kernels on uint8 NHWC images, and the per-sample random draws they share with
// the CPU transforms of data/:
//   - crop_flip_normalize: per sample a crop (random, or centred) of a zero-padded image, an
//     optional horizontal flip, and (x - mean) / std into f32/f16/bf16 (or u8 unchanged);
//   - mixup: x[n] = lam x[n] + (1 - lam) x[N-1-n] for every pair at once, in place;
//   - cutmix: swaps one box between samples n and N-1-n, in place;
//   - mix_targets: the soft targets lam onehot(y[n]) + (1 - lam) onehot(y[N-1-n]), label-smoothed.
// Each function exists in cnn::kernels::cpu (kernels/cpu) and cnn::kernels::cuda (kernels/cuda)
// with the same signature: the stream to run on comes last (the CPU versions ignore it). Random
// draws come from SampleRng, keyed by (seed, epoch, sample): the same crop and flip on CPU and GPU,
// on any number of loader workers.
#pragma once
#include <cstdint>
#include <type_traits>

#include "kernels/common/dtype.h"
#include "kernels/common/error.h"
#include "kernels/common/half.h"
#include "kernels/common/host_device.h"
#include "kernels/common/philox.h"

namespace cnn {

// What a random draw is for: one Philox key word per use, so uses never share numbers.
// batch_crop: the batched crop and flip of crop_flip_normalize, keyed by the sample's place in the
// epoch, so that they never reuse the numbers the per-image transforms drew for the same index.
enum class RngPurpose : uint32_t { augment = 1, shuffle = 2, mix = 3, batch_crop = 4 };

// A sequence of uniform numbers for one sample of one epoch: Philox4x32-10 keyed by the seed and
// purpose, counter (sample, epoch << 24 | block). Each block gives two doubles.
class SampleRng {
 public:
  CNN_HD SampleRng(uint64_t seed, uint64_t epoch, uint64_t sample, RngPurpose purpose = RngPurpose::augment)
      : key_(seed + 0x9E3779B97F4A7C15ull * static_cast<uint64_t>(purpose)), sample_(sample), epoch_(epoch) {}

  // Uniform in [0, 1).
  CNN_HD double uniform() {
    if (next_ == 2) refill();
    return next_++ == 0 ? first_ : second_;
  }
  CNN_HD double uniform(double low, double high) { return low + (high - low) * uniform(); }
  // Uniform integer in [low, high] (inclusive).
  CNN_HD int64_t integer(int64_t low, int64_t high) {
    const int64_t span = high - low + 1;
    int64_t k = static_cast<int64_t>(uniform() * static_cast<double>(span));
    if (k >= span) k = span - 1;
    return low + k;
  }
  CNN_HD bool bernoulli(double p) { return uniform() < p; }

 private:
  CNN_HD void refill() {
    const Philox4 r = philox4x32_10(key_, sample_, (epoch_ << 24) | block_++);
    first_ = 1.0 - philox_unit(r.v[0], r.v[1]);  // philox_unit is in (0, 1]
    second_ = 1.0 - philox_unit(r.v[2], r.v[3]);
    next_ = 0;
  }
  uint64_t key_, sample_, epoch_;
  uint64_t block_ = 0;
  double first_ = 0, second_ = 0;  // scalars, not an array: a dynamic index would put it in local memory
  int next_ = 2;
};

// Normalisation on the 0..255 scale: y = (x - mean[c]) * inv_std[c], with mean = 255 mean01 and
// inv_std = 1 / (255 std01) for torchvision-style mean01/std01.
struct NormalizeParams {
  float mean[4] = {0, 0, 0, 0};
  float inv_std[4] = {1, 1, 1, 1};
};

// values[c] by selects: indexing a kernel parameter's array with a runtime index would copy it to
// local memory.
CNN_HD float channel_value(const float (&values)[4], int c) {
  return c == 0 ? values[0] : c == 1 ? values[1] : c == 2 ? values[2] : values[3];
}

CNN_HD float normalize_value(uint8_t x, const NormalizeParams& p, int c) {
  return (static_cast<float>(x) - channel_value(p.mean, c)) * channel_value(p.inv_std, c);
}

// Crop geometry of crop_flip_normalize: out_h x out_w windows of the input zero-padded by
// `padding` on every side; random windows (top, left uniform over all positions) or centred ones
// (offset round-half-even((in + 2 padding - out) / 2), torchvision's CenterCrop), and a horizontal
// flip with probability flip_probability.
struct CropFlipParams {
  int in_h = 0, in_w = 0, channels = 0;
  int out_h = 0, out_w = 0;
  int padding = 0;
  bool random_crop = true;
  float flip_probability = 0.5f;
  uint64_t seed = 0, epoch = 0;
  uint64_t first_sample = 0;  // sample n of the batch draws with key first_sample + n
};

struct CropWindow {
  int top, left;  // in the padded image
  bool flip;
};

// Centred offset of a window of `out` in `in`: round half to even of (in - out) / 2.
CNN_HD int centered_offset(int in, int out) {
  const int twice = in - out;  // offset = twice / 2, rounded half to even
  int half_down = twice >= 0 ? twice / 2 : -((-twice + 1) / 2);
  if ((twice & 1) && (half_down & 1)) ++half_down;
  return half_down;
}

// The window of one sample: draws top, then left (random crop), then the flip, in that order, the
// same draws as data/'s RandomCrop followed by RandomHorizontalFlip.
CNN_HD CropWindow draw_crop_window(const CropFlipParams& p, SampleRng& rng) {
  CropWindow w{0, 0, false};
  const int span_h = p.in_h + 2 * p.padding - p.out_h, span_w = p.in_w + 2 * p.padding - p.out_w;
  if (p.random_crop) {
    w.top = static_cast<int>(rng.integer(0, span_h));
    w.left = static_cast<int>(rng.integer(0, span_w));
  } else {
    w.top = centered_offset(p.in_h + 2 * p.padding, p.out_h);
    w.left = centered_offset(p.in_w + 2 * p.padding, p.out_w);
  }
  if (p.flip_probability > 0) w.flip = rng.bernoulli(p.flip_probability);
  return w;
}

// Input pixel for output (y, x, c) of one sample's window: 0 in the padding.
CNN_HD uint8_t window_pixel(const uint8_t* sample, const CropFlipParams& p, const CropWindow& w, int y, int x, int c) {
  const int source_x = w.flip ? p.out_w - 1 - x : x;
  const int iy = w.top + y - p.padding, ix = w.left + source_x - p.padding;
  if (iy < 0 || iy >= p.in_h || ix < 0 || ix >= p.in_w) return 0;
  return sample[(static_cast<int64_t>(iy) * p.in_w + ix) * p.channels + c];
}

// Stores the normalised value of pixel x for channel c as T (a u8 output keeps x).
template <class T>
CNN_HD void store_normalized(T* out, int64_t i, uint8_t x, const NormalizeParams& p, int c) {
  if constexpr (std::is_same_v<T, uint8_t>) {
    out[i] = x;
  } else {
    out[i] = from_compute<T>(normalize_value(x, p, c));
  }
}

// One mixed pair: a' = lam a + (1 - lam) b and b' = lam b + (1 - lam) a.
CNN_HD void mix_pair(float& a, float& b, float lam) {
  const float a0 = a, b0 = b;
  a = lam * a0 + (1.0f - lam) * b0;
  b = lam * b0 + (1.0f - lam) * a0;
}

// The CutMix box [y0, y1) x [x0, x1) of an h x w image; every sample of the batch uses it.
struct CutBox {
  int y0 = 0, y1 = 0, x0 = 0, x1 = 0;
};

namespace kernels {

using Stream = void*;

// Calls f with a value of the storage type of a crop_flip_normalize output dtype.
template <class F>
void dispatch_augment_output(DType dt, F&& f) {
  switch (dt) {
    case DType::f32: f(float{}); return;
    case DType::f16: f(half{}); return;
    case DType::bf16: f(bfloat16{}); return;
    case DType::u8: f(uint8_t{}); return;
    default:
      CNN_FAIL("crop_flip_normalize: output dtype ", dtype_name(dt), " is not supported; use f32, f16, bf16 or u8");
  }
}

#define CNN_AUGMENT_KERNELS(...)                                                                           \
  /* in: u8 [n, in_h, in_w, channels]; out: out_dt (f32, f16, bf16 or u8) [n, out_h, out_w, channels].  */ \
  /* u8 output copies the cropped, flipped pixels (padding 0) and ignores `norm`. */                      \
  void crop_flip_normalize(const uint8_t* in, int64_t n, const CropFlipParams& params,                    \
                           const NormalizeParams& norm, DType out_dt, void* out __VA_ARGS__);              \
  /* x: dt (floating) [n, sample_elems]; pairs (k, n-1-k) mixed in place with weight lam. */             \
  void mixup(DType dt, void* x, int64_t n, int64_t sample_elems, float lam __VA_ARGS__);                   \
  /* x: dt (any) [n, h, w, c]; the box of samples k and n-1-k swapped in place. */                        \
  void cutmix(DType dt, void* x, int64_t n, int h, int w, int c, CutBox box __VA_ARGS__);                 \
  /* targets f32 [n, classes] = lam t(y[k]) + (1 - lam) t(y[n-1-k]), with t(y) the one-hot of y         */ \
  /* smoothed to 1 - smoothing + smoothing / classes and smoothing / classes elsewhere. */               \
  void mix_targets(const int64_t* labels, int64_t n, int64_t classes, float lam, float smoothing,         \
                   float* targets __VA_ARGS__);

namespace cpu {
CNN_AUGMENT_KERNELS(, Stream stream = nullptr)
}
namespace cuda {
CNN_AUGMENT_KERNELS(, Stream stream)
}
#undef CNN_AUGMENT_KERNELS

}  // namespace kernels
}  // namespace cnn
