// RandAugment: torchvision's op space and magnitudes, the per-sample op draws, and the 14 ops on
// 8-bit HWC images. The arithmetic mirrors torchvision's tensor functionals (float32 blends
// truncated to 8 bits, integer histogram equalisation, nearest-neighbour affine grids); see
// randaugment.h for the definitions.
#include "data/randaugment.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace cnn::data {

namespace {
// torch.linspace(start, end, steps)[i] in float32, the way its CPU kernel computes it: the first
// half counted up from start, the second half down from end, each a fused multiply-add (the kernel
// is built with FMA for AVX2 and AVX-512; 0.9 - 0.03 * 10, for one, is 0.59999996 fused but
// 0.60000002 rounded twice).
double linspace_f32(double start, double end, int steps, int i) {
  const auto s = static_cast<float>(start), e = static_cast<float>(end);
  const float step = (e - s) / static_cast<float>(steps - 1);
  if (i < steps / 2) return std::fma(step, static_cast<float>(i), s);
  return std::fma(-step, static_cast<float>(steps - 1 - i), e);
}

// Python's math.radians and math.degrees: one multiplication by a rounded constant.
double radians(double deg) { return deg * (std::numbers::pi / 180.0); }
double degrees(double rad) { return rad * (180.0 / std::numbers::pi); }

// torchvision's _get_inverse_affine_matrix (scale 1), step for step in double as there: the map
// from output to input coordinates, both relative to the image centre, of rotation by `angle`
// (degrees; positive turns content clockwise on screen), shears sx, sy (degrees) and translation
// (tx, ty), about (cx, cy).
std::array<double, 6> inverse_affine(double cx, double cy, double angle, double tx, double ty, double shear_x,
                                     double shear_y) {
  const double rot = radians(angle), sx = radians(shear_x), sy = radians(shear_y);
  const double a = std::cos(rot - sy) / std::cos(sy);
  const double b = -std::cos(rot - sy) * std::tan(sx) / std::cos(sy) - std::sin(rot);
  const double c = std::sin(rot - sy) / std::cos(sy);
  const double d = -std::sin(rot - sy) * std::tan(sx) / std::cos(sy) + std::cos(rot);
  std::array<double, 6> m = {d, -b, 0.0, -c, a, 0.0};  // the inverse of [[a, b], [c, d]] (determinant 1)
  m[2] += m[0] * (-cx - tx) + m[1] * (-cy - ty);
  m[5] += m[3] * (-cx - tx) + m[4] * (-cy - ty);
  m[2] += cx;
  m[5] += cy;
  return m;
}

// torchvision's _blend of x with y at `factor`: float32 products and sum, clamped, truncated.
struct Blend {
  explicit Blend(double factor) : ratio(static_cast<float>(factor)), rest(static_cast<float>(1.0 - factor)) {}
  uint8_t operator()(uint8_t x, float y) const {
    const float v = ratio * static_cast<float>(x) + rest * y;
    return static_cast<uint8_t>(std::clamp(v, 0.0f, 255.0f));
  }
  float ratio, rest;
};

// rgb_to_grayscale of a uint8 tensor: the luma in float32, truncated.
uint8_t gray(const uint8_t* p) { return static_cast<uint8_t>(luma(p[0], p[1], p[2])); }

void check_channels(const Image& image, const char* what) {
  CNN_CHECK(image.channels == 1 || image.channels == 3, what, ": images must have 1 or 3 channels, not ",
            image.channels);
}
}  // namespace

// ---- the transform ----
RandAugment::RandAugment(int num_ops, int magnitude) : num_ops_(num_ops), magnitude_(magnitude) {
  CNN_CHECK(num_ops >= 0, "RandAugment: num_ops ", num_ops, " must not be negative");
  CNN_CHECK(magnitude >= 0 && magnitude < kNumBins, "RandAugment: magnitude ", magnitude, " must be in [0, ",
            kNumBins - 1, "]");
}

std::string RandAugment::name() const {
  return "RandAugment(" + std::to_string(num_ops_) + ", " + std::to_string(magnitude_) + ")";
}

const char* RandAugment::op_name(AugmentOp op) {
  switch (op) {
    case AugmentOp::identity: return "Identity";
    case AugmentOp::shear_x: return "ShearX";
    case AugmentOp::shear_y: return "ShearY";
    case AugmentOp::translate_x: return "TranslateX";
    case AugmentOp::translate_y: return "TranslateY";
    case AugmentOp::rotate: return "Rotate";
    case AugmentOp::brightness: return "Brightness";
    case AugmentOp::color: return "Color";
    case AugmentOp::contrast: return "Contrast";
    case AugmentOp::sharpness: return "Sharpness";
    case AugmentOp::posterize: return "Posterize";
    case AugmentOp::solarize: return "Solarize";
    case AugmentOp::autocontrast: return "AutoContrast";
    case AugmentOp::equalize: return "Equalize";
  }
  return "?";
}

bool RandAugment::is_signed(AugmentOp op) {
  return op == AugmentOp::shear_x || op == AugmentOp::shear_y || op == AugmentOp::translate_x ||
         op == AugmentOp::translate_y || op == AugmentOp::rotate || op == AugmentOp::brightness ||
         op == AugmentOp::color || op == AugmentOp::contrast || op == AugmentOp::sharpness;
}

double RandAugment::magnitude(AugmentOp op, int bin, int image_h, int image_w) {
  CNN_CHECK(bin >= 0 && bin < kNumBins, "RandAugment: magnitude bin ", bin, " must be in [0, ", kNumBins - 1, "]");
  switch (op) {
    case AugmentOp::shear_x:
    case AugmentOp::shear_y: return linspace_f32(0.0, 0.3, kNumBins, bin);
    case AugmentOp::translate_x: return linspace_f32(0.0, 150.0 / 331.0 * image_w, kNumBins, bin);
    case AugmentOp::translate_y: return linspace_f32(0.0, 150.0 / 331.0 * image_h, kNumBins, bin);
    case AugmentOp::rotate: return linspace_f32(0.0, 30.0, kNumBins, bin);
    case AugmentOp::brightness:
    case AugmentOp::color:
    case AugmentOp::contrast:
    case AugmentOp::sharpness: return linspace_f32(0.0, 0.9, kNumBins, bin);
    case AugmentOp::posterize:  // 8 - round(arange(31) / 7.5), in float32, half to even
      return 8 - static_cast<int>(std::nearbyint(static_cast<float>(bin) / ((kNumBins - 1) / 4.0f)));
    case AugmentOp::solarize: return linspace_f32(255.0, 0.0, kNumBins, bin);
    default: return 0.0;
  }
}

std::vector<AugmentStep> RandAugment::sample_ops(int image_h, int image_w, SampleRng& rng) const {
  std::vector<AugmentStep> steps;
  for (int i = 0; i < num_ops_; ++i) {
    AugmentStep step;
    step.op = static_cast<AugmentOp>(rng.integer(0, kNumOps - 1));
    step.magnitude = magnitude(step.op, magnitude_, image_h, image_w);
    if (is_signed(step.op) && rng.bernoulli(0.5)) step.magnitude = -step.magnitude;
    steps.push_back(step);
  }
  return steps;
}

Image RandAugment::apply(Image image, SampleRng& rng) const {
  check_channels(image, "RandAugment");
  for (const AugmentStep& step : sample_ops(image.height, image.width, rng)) image = apply_op(std::move(image), step);
  return image;
}

Image RandAugment::apply_op(Image image, const AugmentStep& step) {
  const double m = step.magnitude;
  switch (step.op) {
    case AugmentOp::identity: return image;
    case AugmentOp::shear_x: return shear_x(image, m);
    case AugmentOp::shear_y: return shear_y(image, m);
    case AugmentOp::translate_x: return translate(image, static_cast<int>(m), 0);
    case AugmentOp::translate_y: return translate(image, 0, static_cast<int>(m));
    case AugmentOp::rotate: return rotate(image, m);
    case AugmentOp::brightness: return brightness(std::move(image), 1.0 + m);
    case AugmentOp::color: return color(std::move(image), 1.0 + m);
    case AugmentOp::contrast: return contrast(std::move(image), 1.0 + m);
    case AugmentOp::sharpness: return sharpness(std::move(image), 1.0 + m);
    case AugmentOp::posterize: return posterize(std::move(image), static_cast<int>(m));
    case AugmentOp::solarize: return solarize(std::move(image), m);
    case AugmentOp::autocontrast: return autocontrast(std::move(image));
    case AugmentOp::equalize: return equalize(std::move(image));
  }
  return image;
}

// ---- geometric ops ----
// torchvision's _gen_affine_grid and grid_sample (nearest, zeros, align_corners false) as their CPU
// kernels evaluate them, all in float32: theta rounded to float32 and divided by half the size,
// the normalised source (X a + Y b) + c, unnormalised as (g + 1) (size / 2) - 0.5 and rounded half
// to even. The shears put many source coordinates on exact half pixels (0.2 (y + 0.5) at y = 2,
// or x + tan(atan(1)) (y + 0.5) everywhere), so the result depends on these roundings.
Image RandAugment::warp_nearest(const Image& image, const std::array<double, 6>& m) {
  const int h = image.height, w = image.width, c = image.channels;
  Image out(h, w, c);  // zero-initialised: the fill
  const float half_w = 0.5f * static_cast<float>(w), half_h = 0.5f * static_cast<float>(h);
  std::array<float, 6> theta{};
  for (size_t k = 0; k < 3; ++k) {
    theta[k] = static_cast<float>(m[k]) / half_w;
    theta[k + 3] = static_cast<float>(m[k + 3]) / half_h;
  }
  for (int y = 0; y < h; ++y) {
    const auto Y = static_cast<float>(y - 0.5 * (h - 1));
    for (int x = 0; x < w; ++x) {
      const auto X = static_cast<float>(x - 0.5 * (w - 1));
      const float gx = X * theta[0] + Y * theta[1] + theta[2];
      const float gy = X * theta[3] + Y * theta[4] + theta[5];
      const float sx = std::nearbyint((gx + 1.0f) * half_w - 0.5f);
      const float sy = std::nearbyint((gy + 1.0f) * half_h - 0.5f);
      if (sx < 0 || sx >= static_cast<float>(w) || sy < 0 || sy >= static_cast<float>(h)) continue;
      const uint8_t* from = image.row(static_cast<int>(sy)) + static_cast<size_t>(sx) * c;
      std::copy(from, from + c, out.row(y) + static_cast<size_t>(x) * c);
    }
  }
  return out;
}

// torchvision: affine(shear=[degrees(atan(factor)), 0], center=[0, 0]).
Image RandAugment::shear_x(const Image& image, double factor) {
  return warp_nearest(image,
                      inverse_affine(-0.5 * image.width, -0.5 * image.height, 0, 0, 0, degrees(std::atan(factor)), 0));
}

Image RandAugment::shear_y(const Image& image, double factor) {
  return warp_nearest(image,
                      inverse_affine(-0.5 * image.width, -0.5 * image.height, 0, 0, 0, 0, degrees(std::atan(factor))));
}

Image RandAugment::translate(const Image& image, int dx, int dy) {
  return warp_nearest(image, inverse_affine(0, 0, 0, dx, dy, 0, 0));
}

// torchvision's rotate passes -angle to the affine matrix: positive degrees turn counter-clockwise.
Image RandAugment::rotate(const Image& image, double degrees) {
  return warp_nearest(image, inverse_affine(0, 0, -degrees, 0, 0, 0, 0));
}

// ---- colour ops ----
Image RandAugment::brightness(Image image, double factor) {
  const Blend blend(factor);
  for (uint8_t& v : image.pixels) v = blend(v, 0.0f);
  return image;
}

Image RandAugment::color(Image image, double factor) {
  check_channels(image, "RandAugment Color");
  if (image.channels == 1) return image;  // as torchvision (and PIL)
  const Blend blend(factor);
  for (size_t i = 0; i < image.pixels.size(); i += 3) {
    uint8_t* p = &image.pixels[i];
    const auto g = static_cast<float>(gray(p));
    for (int c = 0; c < 3; ++c) p[c] = blend(p[c], g);
  }
  return image;
}

Image RandAugment::contrast(Image image, double factor) {
  check_channels(image, "RandAugment Contrast");
  // The mean of the 8-bit grayscale (or of the single channel). An integer sum is what torch's
  // float32 sum gives as long as it stays below 2^24.
  int64_t sum = 0;
  if (image.channels == 3) {
    for (size_t i = 0; i < image.pixels.size(); i += 3) sum += gray(&image.pixels[i]);
  } else {
    for (uint8_t v : image.pixels) sum += v;
  }
  const float mean = static_cast<float>(sum) / static_cast<float>(static_cast<int64_t>(image.height) * image.width);
  const Blend blend(factor);
  for (uint8_t& v : image.pixels) v = blend(v, mean);
  return image;
}

Image RandAugment::sharpness(Image image, double factor) {
  const int h = image.height, w = image.width, c = image.channels;
  if (h <= 2 || w <= 2) return image;
  // The degenerate image: interior pixels smoothed by [[1,1,1],[1,5,1],[1,1,1]] / 13 and rounded
  // (a sum s of 13 weights is never an exact half: round(s / 13) = (2 s + 13) / 26), the border kept.
  Image smooth = image;
  for (int y = 1; y < h - 1; ++y)
    for (int x = 1; x < w - 1; ++x)
      for (int k = 0; k < c; ++k) {
        int s = 4 * image.at(y, x, k);
        for (int dy = -1; dy <= 1; ++dy)
          for (int dx = -1; dx <= 1; ++dx) s += image.at(y + dy, x + dx, k);
        smooth.at(y, x, k) = static_cast<uint8_t>((2 * s + 13) / 26);
      }
  const Blend blend(factor);
  for (size_t i = 0; i < image.pixels.size(); ++i)
    image.pixels[i] = blend(image.pixels[i], static_cast<float>(smooth.pixels[i]));
  return image;
}

Image RandAugment::posterize(Image image, int bits) {
  CNN_CHECK(bits >= 0 && bits <= 8, "RandAugment Posterize: bits ", bits, " must be in [0, 8]");
  const auto mask = static_cast<uint8_t>(0xFF00 >> bits);  // the top `bits` bits
  for (uint8_t& v : image.pixels) v &= mask;
  return image;
}

Image RandAugment::solarize(Image image, double threshold) {
  const auto t = static_cast<float>(threshold);
  for (uint8_t& v : image.pixels)
    if (static_cast<float>(v) >= t) v = static_cast<uint8_t>(255 - v);
  return image;
}

Image RandAugment::autocontrast(Image image) {
  const int c = image.channels;
  for (int k = 0; k < c; ++k) {
    uint8_t lo = 255, hi = 0;
    for (size_t i = static_cast<size_t>(k); i < image.pixels.size(); i += static_cast<size_t>(c)) {
      lo = std::min(lo, image.pixels[i]);
      hi = std::max(hi, image.pixels[i]);
    }
    if (lo >= hi) continue;  // constant: torchvision's scale is inf there, replaced by the identity
    const auto low = static_cast<float>(lo);
    // torchvision's bound / (max - min) is a tensor's __rtruediv__: reciprocal, then times 255, two
    // roundings. It sends the maximum to 254 for some ranges (61, 67, ...) and 255 / 7 * 7 to 255.
    const float scale = 1.0f / (static_cast<float>(hi) - low) * 255.0f;
    for (size_t i = static_cast<size_t>(k); i < image.pixels.size(); i += static_cast<size_t>(c))
      image.pixels[i] = static_cast<uint8_t>(std::clamp((static_cast<float>(image.pixels[i]) - low) * scale, 0.0f, 255.0f));
  }
  return image;
}

Image RandAugment::equalize(Image image) {
  const int c = image.channels;
  for (int k = 0; k < c; ++k) {
    std::array<int64_t, 256> hist{};
    for (size_t i = static_cast<size_t>(k); i < image.pixels.size(); i += static_cast<size_t>(c)) ++hist[image.pixels[i]];
    int last = 255;
    while (last > 0 && hist[static_cast<size_t>(last)] == 0) --last;
    int64_t total = 0;
    for (int64_t count : hist) total += count;
    const int64_t step = (total - hist[static_cast<size_t>(last)]) / 255;
    if (step == 0) continue;
    std::array<uint8_t, 256> lut{};  // lut[0] = 0
    int64_t cumulative = 0;
    for (size_t i = 1; i < 256; ++i) {
      cumulative += hist[i - 1];
      lut[i] = static_cast<uint8_t>(std::min<int64_t>(255, (cumulative + step / 2) / step));
    }
    for (size_t i = static_cast<size_t>(k); i < image.pixels.size(); i += static_cast<size_t>(c))
      image.pixels[i] = lut[image.pixels[i]];
  }
  return image;
}

}  // namespace cnn::data
