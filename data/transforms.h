// CPU transforms on 8-bit HWC images, torchvision's semantics, and the pipeline that chains them
// and normalises the result into a batch slot. Every random choice comes from a SampleRng keyed by
// (seed, epoch, sample index), so a sample is augmented the same way whichever worker handles it,
// and a resumed run draws what the uninterrupted one would have.
//
//   training (ImageNet): RandomResizedCrop(224) + RandomHorizontalFlip + Normalize
//   evaluation:          Resize(256) + CenterCrop(224) + Normalize
//   CIFAR training:      RandomCrop(32, padding 4) + RandomHorizontalFlip + Normalize
//   stronger training:   RandomResizedCrop(224) + RandomHorizontalFlip + RandAugment(2, 9)
//                        (randaugment.h) + Normalize + RandomErasing(0.25), the last set with
//                        Pipeline::set_random_erasing: it zeroes a box of the normalised output
#pragma once
#include <array>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "data/decode.h"
#include "data/image.h"
#include "data/resample.h"
#include "kernels/augment.h"

namespace cnn::data {

class Transform {
 public:
  virtual ~Transform() = default;
  virtual Image apply(Image image, SampleRng& rng) const = 0;
  virtual std::string name() const = 0;
  // The shorter side the decoder may shrink a JPEG to (DCT scaling) without this transform losing
// detail (0: full size).
  virtual int decode_min_side() const { return 0; }
};

using TransformPtr = std::shared_ptr<const Transform>;

// A random box covering a fraction of the area drawn from `scale` and an aspect ratio (width /
// height) drawn log-uniformly from `ratio`, resized to height x width. Up to 10 tries, then the
// whole image centre-cropped to the nearest allowed ratio, exactly as torchvision samples it.
// With a flip_probability, the crop is then mirrored with that probability in the same resampling
// pass: bit for bit RandomResizedCrop followed by RandomHorizontalFlip (the same draws, in the same
// order), without the second pass over the image.
class RandomResizedCrop : public Transform {
 public:
  RandomResizedCrop(int height, int width, std::array<double, 2> scale = {0.08, 1.0},
                    std::array<double, 2> ratio = {3.0 / 4.0, 4.0 / 3.0}, double flip_probability = 0.0);
  Image apply(Image image, SampleRng& rng) const override;
  std::string name() const override { return flip_probability_ > 0 ? "RandomResizedCrop+HorizontalFlip" : "RandomResizedCrop"; }
  // Even the smallest crop (scale[0] of the area) keeps full resolution.
  int decode_min_side() const override;
  Box sample_box(int image_h, int image_w, SampleRng& rng) const;

 private:
  int height_, width_;
  std::array<double, 2> scale_, ratio_;
  double flip_probability_;
};

// Resizes so that the shorter side is `shorter` (the longer one scaled to match, truncated). An
// output of more than kDefaultMaxImagePixels is a CorruptImageError (the sample is skipped).
class Resize : public Transform {
 public:
  explicit Resize(int shorter);
  Image apply(Image image, SampleRng& rng) const override;
  std::string name() const override { return "Resize"; }
  int decode_min_side() const override { return shorter_; }
  static std::array<int64_t, 2> output_size(int image_h, int image_w, int shorter);  // {h, w}

 private:
  int shorter_;
};

// The centred height x width window (offsets rounded half to even); zero-padded when larger.
class CenterCrop : public Transform {
 public:
  CenterCrop(int height, int width);
  Image apply(Image image, SampleRng& rng) const override;
  std::string name() const override { return "CenterCrop"; }

 private:
  int height_, width_;
};

// A random height x width window of the image zero-padded by `padding` on each side.
class RandomCrop : public Transform {
 public:
  RandomCrop(int height, int width, int padding = 0);
  Image apply(Image image, SampleRng& rng) const override;
  std::string name() const override { return "RandomCrop"; }

 private:
  int height_, width_, padding_;
};

class RandomHorizontalFlip : public Transform {
 public:
  explicit RandomHorizontalFlip(double probability = 0.5);
  Image apply(Image image, SampleRng& rng) const override;
  std::string name() const override { return "RandomHorizontalFlip"; }

 private:
  double probability_;
};

// The factors of one ColorJitter draw and the order the four adjustments are applied in
// (0 brightness, 1 contrast, 2 saturation, 3 hue).
struct JitterFactors {
  float brightness = 1, contrast = 1, saturation = 1, hue = 0;
  std::array<int, 4> order = {0, 1, 2, 3};
};

// Brightness, contrast and saturation factors uniform in [max(0, 1 - x), 1 + x]; hue shift uniform
// in [-hue, hue] (a fraction of the colour circle, at most 0.5); applied in a random order.
// Brightness scales pixels; contrast blends with the mean luma; saturation blends with each
// pixel's luma; hue rotates in HSV. Each step rounds to 8 bits.
class ColorJitter : public Transform {
 public:
  ColorJitter(float brightness, float contrast, float saturation, float hue);
  Image apply(Image image, SampleRng& rng) const override;
  std::string name() const override { return "ColorJitter"; }
  JitterFactors sample_factors(SampleRng& rng) const;
  static void adjust(Image& image, const JitterFactors& factors);  // needs 3 channels

 private:
  float brightness_, contrast_, saturation_, hue_;
};

// mean and std per channel on the 0..1 scale (torchvision's convention).
struct Normalize {
  std::vector<float> mean, std;
  NormalizeParams params(int channels) const;  // checks the sizes
  static Normalize imagenet() { return {{0.485f, 0.456f, 0.406f}, {0.229f, 0.224f, 0.225f}}; }
  static Normalize identity(int channels) {  // x / 255
    return {std::vector<float>(static_cast<size_t>(channels), 0.0f), std::vector<float>(static_cast<size_t>(channels), 1.0f)};
  }
};

// Writes image into one batch slot of `dtype` (f32, f16, bf16: normalised; u8: copied).
void write_sample(const Image& image, const NormalizeParams& norm, DType dtype, void* slot);

// Zeroes `box` of every channel in a batch slot of `dtype` holding width x channels per row:
// 0.0 in f32, f16 and bf16 (all-zero bits), 0 in u8.
void erase_box(void* slot, DType dtype, const Box& box, int width, int channels);

// torchvision's RandomErasing with value 0, which it applies after Normalize: with probability
// `probability`, a box whose area is a fraction of the image uniform in `scale` and whose aspect
// ratio (height / width) is log-uniform in `ratio`, sides rounded half to even, at a uniform
// position; up to 10 tries to find one smaller than the image in both sides, else none.
struct RandomErasing {
  double probability = 0.5;
  std::array<double, 2> scale = {0.02, 0.33};
  std::array<double, 2> ratio = {0.3, 3.3};
  void check() const;  // a cnn::Error for values outside torchvision's ranges
  // The box to erase in an image_h x image_w sample, or none; the draws in torchvision's order
  // (the coin; then per try the area, the log ratio; then top and left).
  std::optional<Box> sample_box(int image_h, int image_w, SampleRng& rng) const;
};

// The transforms of a loader, the output size they must produce, and the normalisation.
class Pipeline {
 public:
  Pipeline(std::vector<TransformPtr> transforms, int height, int width, int channels, Normalize normalize);

  // ImageNet-style presets.
  static Pipeline train(int size = 224, int channels = 3, Normalize normalize = Normalize::imagenet());
  static Pipeline eval(int resize = 256, int crop = 224, int channels = 3, Normalize normalize = Normalize::imagenet());

  // Random erasing of the normalised output (probability 0, the default: off).
  Pipeline& set_random_erasing(RandomErasing erasing);
  const RandomErasing& random_erasing() const { return erasing_; }

  // Runs the transforms on one sample; the result must be height x width x channels, else a
  // cnn::Error naming `source` and the sizes. A pipeline with random erasing refuses this form.
  Image run(Image image, uint64_t seed, uint64_t epoch, uint64_t sample, const std::string& source) const;
  // The same, and then (random erasing on) the box to erase, drawn from the same SampleRng after
  // the transforms' draws; pass it to write().
  Image run(Image image, uint64_t seed, uint64_t epoch, uint64_t sample, const std::string& source,
            std::optional<Box>& erase) const;
  // write_sample with this pipeline's normalisation, then erase_box of `erase` if any.
  void write(const Image& image, const std::optional<Box>& erase, DType dtype, void* slot) const;
  DecodeOptions decode_options() const;

  int height() const { return height_; }
  int width() const { return width_; }
  int channels() const { return channels_; }
  const NormalizeParams& normalize() const { return norm_; }
  std::string describe() const;

 private:
  std::vector<TransformPtr> transforms_;
  int height_, width_, channels_;
  NormalizeParams norm_;
  RandomErasing erasing_{.probability = 0};
};

}  // namespace cnn::data
