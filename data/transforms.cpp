// Geometric transforms (crops, resizes, flip), normalisation into batch slots, and the pipeline.
#include "data/transforms.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>


namespace cnn::data {

namespace {
int round_half_even(double v) { return static_cast<int>(std::nearbyint(v)); }

// The h x w window at (top, left) of the image, where the window may reach outside it (zeros there).
Image crop_padded(const Image& image, int top, int left, int h, int w) {
  Image out(h, w, image.channels);  // zero-initialised
  const int c = image.channels;
  const int y0 = std::max(top, 0), y1 = std::min(top + h, image.height);
  const int x0 = std::max(left, 0), x1 = std::min(left + w, image.width);
  for (int y = y0; y < y1 && x0 < x1; ++y)
    std::memcpy(out.row(y - top) + static_cast<size_t>(x0 - left) * c, image.row(y) + static_cast<size_t>(x0) * c,
                static_cast<size_t>(x1 - x0) * c);
  return out;
}

void check_size(int h, int w, const char* what) {
  CNN_CHECK(h > 0 && w > 0, what, ": output size ", h, "x", w, " must be positive");
}
}  // namespace

// ---- RandomResizedCrop ----
RandomResizedCrop::RandomResizedCrop(int height, int width, std::array<double, 2> scale, std::array<double, 2> ratio,
                                     double flip_probability)
    : height_(height), width_(width), scale_(scale), ratio_(ratio), flip_probability_(flip_probability) {
  check_size(height, width, "RandomResizedCrop");
  CNN_CHECK(flip_probability >= 0 && flip_probability <= 1, "RandomResizedCrop: flip probability ", flip_probability,
            " is outside [0, 1]");
  CNN_CHECK(scale[0] > 0 && scale[0] <= scale[1] && scale[1] <= 1, "RandomResizedCrop: scale (", scale[0], ", ",
            scale[1], ") must satisfy 0 < low <= high <= 1");
  CNN_CHECK(ratio[0] > 0 && ratio[0] <= ratio[1], "RandomResizedCrop: ratio (", ratio[0], ", ", ratio[1],
            ") must satisfy 0 < low <= high");
}

Box RandomResizedCrop::sample_box(int image_h, int image_w, SampleRng& rng) const {
  const double area = static_cast<double>(image_h) * image_w;
  const double log_lo = std::log(ratio_[0]), log_hi = std::log(ratio_[1]);
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double target = area * rng.uniform(scale_[0], scale_[1]);
    const double aspect = std::exp(rng.uniform(log_lo, log_hi));
    const int w = round_half_even(std::sqrt(target * aspect));
    const int h = round_half_even(std::sqrt(target / aspect));
    if (w > 0 && w <= image_w && h > 0 && h <= image_h) {
      const int top = static_cast<int>(rng.integer(0, image_h - h));
      const int left = static_cast<int>(rng.integer(0, image_w - w));
      return {top, left, h, w};
    }
  }
  const double in_ratio = static_cast<double>(image_w) / image_h;
  int w = image_w, h = image_h;
  // At least one pixel: an extreme ratio (50:1 of a 28x28 image) would round the box to nothing.
  if (in_ratio < ratio_[0]) h = std::max(1, round_half_even(w / ratio_[0]));
  else if (in_ratio > ratio_[1]) w = std::max(1, round_half_even(h * ratio_[1]));
  return {(image_h - h) / 2, (image_w - w) / 2, h, w};
}

int RandomResizedCrop::decode_min_side() const {
  return static_cast<int>(std::ceil(std::max(height_, width_) / std::sqrt(scale_[0])));
}

Image RandomResizedCrop::apply(Image image, SampleRng& rng) const {
  const Box box = sample_box(image.height, image.width, rng);
  const bool mirror = flip_probability_ > 0 && rng.bernoulli(flip_probability_);  // RandomHorizontalFlip's draw
  return resample(image, box, height_, width_, mirror);
}

// ---- Resize ----
Resize::Resize(int shorter) : shorter_(shorter) { check_size(shorter, shorter, "Resize"); }

std::array<int64_t, 2> Resize::output_size(int image_h, int image_w, int shorter) {
  if (image_h <= image_w) return {shorter, static_cast<int64_t>(shorter) * image_w / image_h};
  return {static_cast<int64_t>(shorter) * image_h / image_w, shorter};
}

Image Resize::apply(Image image, SampleRng&) const {
  const auto [h, w] = output_size(image.height, image.width, shorter_);
  // A long thin strip (1 x 1,000,000 resized to a shorter side of 256 is 256 x 256,000,000) would
  // take more memory than any decodable image: it is skipped and counted like an unreadable one.
  if (h * w > kDefaultMaxImagePixels)
    throw CorruptImageError(image.size_str() + " image: resizing its shorter side to " + std::to_string(shorter_) + " gives " +
                            std::to_string(h) + " x " + std::to_string(w) + " pixels, more than the limit of " +
                            std::to_string(kDefaultMaxImagePixels) + " (an aspect ratio of " +
                            std::to_string(std::max(h, w) / std::min(h, w)) + ":1); crop the image or remove it");
  if (h == image.height && w == image.width) return image;
  return resample(image, {0, 0, image.height, image.width}, static_cast<int>(h), static_cast<int>(w));
}

// ---- CenterCrop ----
CenterCrop::CenterCrop(int height, int width) : height_(height), width_(width) {
  check_size(height, width, "CenterCrop");
}

Image CenterCrop::apply(Image image, SampleRng&) const {
  if (image.height == height_ && image.width == width_) return image;
  return crop_padded(image, centered_offset(image.height, height_), centered_offset(image.width, width_), height_,
                     width_);
}

// ---- RandomCrop ----
RandomCrop::RandomCrop(int height, int width, int padding) : height_(height), width_(width), padding_(padding) {
  check_size(height, width, "RandomCrop");
  CNN_CHECK(padding >= 0, "RandomCrop: padding ", padding, " must not be negative");
}

Image RandomCrop::apply(Image image, SampleRng& rng) const {
  CropFlipParams p;  // the same draws as the GPU kernel (kernels/augment.h)
  p.in_h = image.height, p.in_w = image.width, p.channels = image.channels;
  p.out_h = height_, p.out_w = width_, p.padding = padding_;
  p.random_crop = true, p.flip_probability = 0;
  CNN_CHECK(image.height + 2 * padding_ >= height_ && image.width + 2 * padding_ >= width_, "RandomCrop: a ", height_,
            "x", width_, " window does not fit in a ", image.size_str(), " image padded by ", padding_);
  const CropWindow w = draw_crop_window(p, rng);
  return crop_padded(image, w.top - padding_, w.left - padding_, height_, width_);
}

// ---- RandomHorizontalFlip ----
RandomHorizontalFlip::RandomHorizontalFlip(double probability) : probability_(probability) {
  CNN_CHECK(probability >= 0 && probability <= 1, "RandomHorizontalFlip: probability ", probability,
            " is outside [0, 1]");
}

Image RandomHorizontalFlip::apply(Image image, SampleRng& rng) const {
  if (!rng.bernoulli(probability_)) return image;
  const int c = image.channels;
  for (int y = 0; y < image.height; ++y) {
    uint8_t* row = image.row(y);
    for (int l = 0, r = image.width - 1; l < r; ++l, --r)
      std::swap_ranges(row + static_cast<size_t>(l) * c, row + static_cast<size_t>(l + 1) * c,
                       row + static_cast<size_t>(r) * c);
  }
  return image;
}

// ---- normalisation ----
NormalizeParams Normalize::params(int channels) const {
  CNN_CHECK(channels >= 1 && channels <= 4, "Normalize: ", channels, " channels; 1 to 4 are supported");
  CNN_CHECK(mean.size() == static_cast<size_t>(channels) && std.size() == static_cast<size_t>(channels),
            "Normalize: ", mean.size(), " means and ", std.size(), " stds for ", channels,
            " channels; give one of each per channel");
  NormalizeParams p;
  for (int c = 0; c < channels; ++c) {
    CNN_CHECK(std[static_cast<size_t>(c)] > 0, "Normalize: std of channel ", c, " must be positive");
    p.mean[c] = 255.0f * mean[static_cast<size_t>(c)];
    p.inv_std[c] = 1.0f / (255.0f * std[static_cast<size_t>(c)]);
  }
  return p;
}

namespace {
// What store_normalized writes for every byte value of each of up to four channels, computed by
// store_normalized itself, so that a lookup gives exactly its bits (the f16/bf16 conversions
// included) for a few hundred conversions per image instead of one per value.
template <class T>
struct NormalizedTable {
  T value[4][256];
  NormalizedTable(const NormalizeParams& norm, int channels) {
    for (int c = 0; c < channels; ++c)
      for (int x = 0; x < 256; ++x) store_normalized(value[c], x, static_cast<uint8_t>(x), norm, c);
  }
};

// write_sample for C channels (1 to 4): one table lookup per value.
template <int C, class T>
void write_normalized(const uint8_t* pixels, int64_t count, const NormalizedTable<T>& table, T* out) {
  for (int64_t i = 0; i < count; ++i, pixels += C, out += C)
    for (int c = 0; c < C; ++c) out[c] = table.value[c][pixels[c]];
}

// write_sample to f32 for C channels: normalize_value's arithmetic itself, four pixels per step so
// that the channels' means and scales repeat in step with the compiler's 4-wide vectors.
template <int C>
void write_normalized_f32(const uint8_t* pixels, int64_t count, const NormalizeParams& norm, float* out) {
  float mean[4 * C], scale[4 * C];
  for (int j = 0; j < 4 * C; ++j) {
    mean[j] = channel_value(norm.mean, j % C);
    scale[j] = channel_value(norm.inv_std, j % C);
  }
  int64_t i = 0;
  for (; i + 4 <= count; i += 4, pixels += 4 * C, out += 4 * C)
    for (int j = 0; j < 4 * C; ++j) out[j] = (static_cast<float>(pixels[j]) - mean[j]) * scale[j];
  for (; i < count; ++i, pixels += C, out += C)
    for (int c = 0; c < C; ++c) out[c] = normalize_value(pixels[c], norm, c);
}
}  // namespace

void write_sample(const Image& image, const NormalizeParams& norm, DType dtype, void* slot) {
  const auto n = static_cast<int64_t>(image.pixels.size());
  const int c = image.channels;
  const uint8_t* pixels = image.pixels.data();
  kernels::dispatch_augment_output(dtype, [&](auto tag) {
    using T = decltype(tag);
    T* out = static_cast<T*>(slot);
    if constexpr (std::is_same_v<T, uint8_t>) {
      if (n > 0) std::memcpy(out, pixels, static_cast<size_t>(n));
    } else {
      auto write = [&](auto channels) {
        constexpr int C = decltype(channels)::value;
        if constexpr (std::is_same_v<T, float>) write_normalized_f32<C>(pixels, n / C, norm, out);
        else write_normalized<C>(pixels, n / C, NormalizedTable<T>(norm, C), out);
      };
      switch (c) {
        case 1: write(std::integral_constant<int, 1>{}); break;
        case 2: write(std::integral_constant<int, 2>{}); break;
        case 3: write(std::integral_constant<int, 3>{}); break;
        case 4: write(std::integral_constant<int, 4>{}); break;
        default:
          for (int64_t i = 0; i < n; ++i) store_normalized(out, i, pixels[i], norm, static_cast<int>(i % c));
      }
    }
  });
}

void erase_box(void* slot, DType dtype, const Box& box, int width, int channels) {
  CNN_CHECK(box.top >= 0 && box.left >= 0 && box.height >= 0 && box.width >= 0 && box.left + box.width <= width,
            "erase_box: the box (top ", box.top, ", left ", box.left, ", ", box.height, "x", box.width,
            ") is outside a slot ", width, " wide");
  const size_t element = static_cast<size_t>(dtype_size(dtype)) * channels;
  auto* bytes = static_cast<uint8_t*>(slot);
  for (int y = box.top; y < box.top + box.height; ++y)
    std::memset(bytes + (static_cast<size_t>(y) * width + box.left) * element, 0, static_cast<size_t>(box.width) * element);
}

// ---- RandomErasing ----
void RandomErasing::check() const {
  CNN_CHECK(probability >= 0 && probability <= 1, "RandomErasing: probability ", probability, " is outside [0, 1]");
  CNN_CHECK(scale[0] >= 0 && scale[0] <= scale[1] && scale[1] <= 1, "RandomErasing: scale (", scale[0], ", ", scale[1],
            ") must satisfy 0 <= low <= high <= 1");
  CNN_CHECK(ratio[0] > 0 && ratio[0] <= ratio[1], "RandomErasing: ratio (", ratio[0], ", ", ratio[1],
            ") must satisfy 0 < low <= high");
}

std::optional<Box> RandomErasing::sample_box(int image_h, int image_w, SampleRng& rng) const {
  if (!rng.bernoulli(probability)) return std::nullopt;
  const double area = static_cast<double>(image_h) * image_w;
  const double log_lo = std::log(ratio[0]), log_hi = std::log(ratio[1]);
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double target = area * rng.uniform(scale[0], scale[1]);
    const double aspect = std::exp(rng.uniform(log_lo, log_hi));  // height / width
    const int h = round_half_even(std::sqrt(target * aspect));
    const int w = round_half_even(std::sqrt(target / aspect));
    if (h < image_h && w < image_w) {
      const int top = static_cast<int>(rng.integer(0, image_h - h));
      const int left = static_cast<int>(rng.integer(0, image_w - w));
      return Box{top, left, h, w};
    }
  }
  return std::nullopt;  // torchvision returns the image unchanged
}

// ---- Pipeline ----
Pipeline::Pipeline(std::vector<TransformPtr> transforms, int height, int width, int channels, Normalize normalize)
    : transforms_(std::move(transforms)), height_(height), width_(width), channels_(channels) {
  check_size(height, width, "Pipeline");
  CNN_CHECK(channels == 1 || channels == 3, "Pipeline: channels must be 1 or 3, not ", channels);
  norm_ = normalize.params(channels);
  for (const auto& t : transforms_) CNN_CHECK(t != nullptr, "Pipeline: a transform is null");
}

Pipeline Pipeline::train(int size, int channels, Normalize normalize) {
  return Pipeline({std::make_shared<RandomResizedCrop>(size, size, std::array<double, 2>{0.08, 1.0},
                                                      std::array<double, 2>{3.0 / 4.0, 4.0 / 3.0}, 0.5)},
                  size, size, channels, std::move(normalize));
}

Pipeline Pipeline::eval(int resize, int crop, int channels, Normalize normalize) {
  return Pipeline({std::make_shared<Resize>(resize), std::make_shared<CenterCrop>(crop, crop)}, crop, crop, channels,
                  std::move(normalize));
}

Pipeline& Pipeline::set_random_erasing(RandomErasing erasing) {
  erasing.check();
  erasing_ = erasing;
  return *this;
}

Image Pipeline::run(Image image, uint64_t seed, uint64_t epoch, uint64_t sample, const std::string& source) const {
  CNN_CHECK(erasing_.probability == 0, source, ": this pipeline erases random boxes after normalisation; run it with "
            "the overload that returns the box (and write with Pipeline::write)");
  std::optional<Box> none;
  return run(std::move(image), seed, epoch, sample, source, none);
}

void Pipeline::write(const Image& image, const std::optional<Box>& erase, DType dtype, void* slot) const {
  write_sample(image, norm_, dtype, slot);
  if (erase) erase_box(slot, dtype, *erase, image.width, image.channels);
}

Image Pipeline::run(Image image, uint64_t seed, uint64_t epoch, uint64_t sample, const std::string& source,
                    std::optional<Box>& erase) const {
  erase.reset();
  SampleRng rng(seed, epoch, sample);
  try {
    for (const auto& t : transforms_) image = t->apply(std::move(image), rng);
  } catch (const CorruptImageError& e) {  // a transform found the sample unusable: name the file
    throw CorruptImageError(source + ": " + e.what());
  }
  CNN_CHECK(image.height == height_ && image.width == width_ && image.channels == channels_, source, ": the transforms (",
            describe(), ") produced a ", image.size_str(), " image, but batches are ", height_, "x", width_, "x",
            channels_, "; end the pipeline with a crop of that size");
  if (erasing_.probability > 0) erase = erasing_.sample_box(image.height, image.width, rng);
  return image;
}

DecodeOptions Pipeline::decode_options() const {
  DecodeOptions options;
  options.channels = channels_;
  options.min_side = transforms_.empty() ? 0 : transforms_.front()->decode_min_side();
  return options;
}

std::string Pipeline::describe() const {
  std::string text;
  for (const auto& t : transforms_) text += (text.empty() ? "" : " + ") + t->name();
  if (erasing_.probability > 0) {
    char erasing[64];
    std::snprintf(erasing, sizeof erasing, "RandomErasing(%g) after Normalize", erasing_.probability);
    text += (text.empty() ? "" : " + ") + std::string(erasing);
  }
  return text.empty() ? "none" : text;
}

}  // namespace cnn::data
