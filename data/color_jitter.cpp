// ColorJitter: random brightness, contrast, saturation and hue adjustments in a random order, each
// computed in float and rounded back to 8 bits.
#include <algorithm>
#include <cmath>

#include "data/transforms.h"

namespace cnn::data {

namespace {
uint8_t to_byte(float v) { return static_cast<uint8_t>(std::clamp(std::nearbyint(v), 0.0f, 255.0f)); }

// Blends every pixel with `other(pixel)`: v' = factor v + (1 - factor) other.
template <class Other>
void blend(Image& image, float factor, Other other) {
  const size_t pixels = static_cast<size_t>(image.height) * image.width;
  for (size_t i = 0; i < pixels; ++i) {
    uint8_t* p = &image.pixels[3 * i];
    const float o = other(p);
    for (int c = 0; c < 3; ++c) p[c] = to_byte(factor * p[c] + (1.0f - factor) * o);
  }
}

void shift_hue(Image& image, float shift) {
  const size_t pixels = static_cast<size_t>(image.height) * image.width;
  for (size_t i = 0; i < pixels; ++i) {
    uint8_t* p = &image.pixels[3 * i];
    const float r = p[0] / 255.0f, g = p[1] / 255.0f, b = p[2] / 255.0f;
    const float max = std::max({r, g, b}), min = std::min({r, g, b}), chroma = max - min;
    if (chroma <= 0) continue;  // gray: hue has no effect
    float h = 0;                // in [0, 1)
    if (max == r) h = (g - b) / chroma / 6.0f;
    else if (max == g) h = ((b - r) / chroma + 2.0f) / 6.0f;
    else h = ((r - g) / chroma + 4.0f) / 6.0f;
    h += shift;
    h -= std::floor(h);
    const float s = chroma / max, v = max;
    // HSV back to RGB.
    const float sector = h * 6.0f;
    const int k = static_cast<int>(sector) % 6;
    const float f = sector - std::floor(sector);
    const float pv = v * (1 - s), qv = v * (1 - s * f), tv = v * (1 - s * (1 - f));
    float rgb[3];
    switch (k) {
      case 0: rgb[0] = v, rgb[1] = tv, rgb[2] = pv; break;
      case 1: rgb[0] = qv, rgb[1] = v, rgb[2] = pv; break;
      case 2: rgb[0] = pv, rgb[1] = v, rgb[2] = tv; break;
      case 3: rgb[0] = pv, rgb[1] = qv, rgb[2] = v; break;
      case 4: rgb[0] = tv, rgb[1] = pv, rgb[2] = v; break;
      default: rgb[0] = v, rgb[1] = pv, rgb[2] = qv; break;
    }
    for (int c = 0; c < 3; ++c) p[c] = to_byte(rgb[c] * 255.0f);
  }
}
}  // namespace

ColorJitter::ColorJitter(float brightness, float contrast, float saturation, float hue)
    : brightness_(brightness), contrast_(contrast), saturation_(saturation), hue_(hue) {
  CNN_CHECK(brightness >= 0 && contrast >= 0 && saturation >= 0, "ColorJitter: brightness ", brightness,
            ", contrast ", contrast, " and saturation ", saturation, " must not be negative");
  CNN_CHECK(hue >= 0 && hue <= 0.5f, "ColorJitter: hue ", hue, " must be in [0, 0.5]");
}

JitterFactors ColorJitter::sample_factors(SampleRng& rng) const {
  JitterFactors f;
  for (int i = 3; i > 0; --i) std::swap(f.order[static_cast<size_t>(i)], f.order[static_cast<size_t>(rng.integer(0, i))]);
  auto factor = [&](float x) { return static_cast<float>(rng.uniform(std::max(0.0f, 1.0f - x), 1.0f + x)); };
  f.brightness = factor(brightness_);
  f.contrast = factor(contrast_);
  f.saturation = factor(saturation_);
  f.hue = static_cast<float>(rng.uniform(-hue_, hue_));
  return f;
}

void ColorJitter::adjust(Image& image, const JitterFactors& f) {
  CNN_CHECK(image.channels == 3, "ColorJitter needs RGB images, not ", image.channels, " channels");
  for (int step : f.order) {
    switch (step) {
      case 0:
        if (f.brightness != 1) blend(image, f.brightness, [](const uint8_t*) { return 0.0f; });
        break;
      case 1:
        if (f.contrast != 1) {
          double sum = 0;
          const size_t pixels = static_cast<size_t>(image.height) * image.width;
          for (size_t i = 0; i < pixels; ++i) {
            const uint8_t* p = &image.pixels[3 * i];
            sum += luma(p[0], p[1], p[2]);
          }
          const float mean = static_cast<float>(sum / static_cast<double>(pixels));
          blend(image, f.contrast, [mean](const uint8_t*) { return mean; });
        }
        break;
      case 2:
        if (f.saturation != 1) blend(image, f.saturation, [](const uint8_t* p) { return luma(p[0], p[1], p[2]); });
        break;
      default:
        if (f.hue != 0) shift_hue(image, f.hue);
        break;
    }
  }
}

Image ColorJitter::apply(Image image, SampleRng& rng) const {
  adjust(image, sample_factors(rng));
  return image;
}

}  // namespace cnn::data
