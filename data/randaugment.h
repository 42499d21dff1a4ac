// RandAugment (Cubuk et al. 2019) on 8-bit HWC images with 1 or 3 channels, the way
// torchvision.transforms.RandAugment does it on a uint8 tensor: per sample, num_ops ops drawn
// uniformly (with replacement) from 14, each at the same magnitude bin (0..30 of 31), the signed
// ops negated with probability 1/2. The magnitudes are torchvision's _augmentation_space:
//
//   Identity, AutoContrast, Equalize   no magnitude
//   ShearX, ShearY       shear factor   linspace(0, 0.3, 31)             signed
//   TranslateX, -Y       pixels         linspace(0, 150/331 size, 31)    signed, truncated to int
//   Rotate               degrees        linspace(0, 30, 31)              signed, counter-clockwise
//   Brightness, Color,   factor 1 + m   m in linspace(0, 0.9, 31)        signed
//   Contrast, Sharpness
//   Posterize            bits kept      8 - round(bin / 7.5)             (8 .. 4)
//   Solarize             threshold      linspace(255, 0, 31)
//
// The linspaces are evaluated in float32 as torch.linspace's CPU kernel does (each value one fused
// multiply-add, so bin 20 of 0..0.9 is 0.59999996, not 0.6). The ops follow torchvision's tensor
// functionals:
//   - geometric ops warp with nearest-neighbour sampling and fill 0 (grid_sample, align_corners
//     false): output pixel centre (x, y) reads the source pixel nearest (round half to even) to
//     M^-1 (x, y), where M is torchvision's affine matrix about the image centre for translate and
//     rotate, and about the top-left corner for the shears (torchvision passes center=[0, 0] there,
//     as the original AutoAugment does): ShearX reads x + s (y + 0.5), ShearY y + s (x + 0.5).
//     The grid is computed in float32 step for step as torchvision computes it, which decides the
//     source coordinates that are exactly half a pixel (Rotate 30 reads 1.5 rows up at x = 0 of
//     a 7-wide image's middle row, ShearX 1 reads x + y + 0.5 everywhere);
//   - Brightness, Color (saturation), Contrast and Sharpness blend the image with black, its
//     grayscale (0.2989 R + 0.587 G + 0.114 B, truncated to 8 bits), the mean of that grayscale,
//     or the image smoothed by [[1,1,1],[1,5,1],[1,1,1]] / 13 (rounded; the border rows and
//     columns left as they are): v = f x + (1 - f) y in float32, clamped to 0..255 and truncated,
//     exactly as torchvision's _blend (so even a blend of a pixel with itself can lose one level
//     at some factors). Color is the identity on 1 channel, Sharpness on images under 3x3;
//   - Posterize keeps the top `bits` bits; Solarize inverts (255 - x) pixels >= the threshold;
//   - AutoContrast maps each channel's [min, max] to [0, 255]: (x - min) (255 (1 / (max - min))),
//     float32, truncated, constant channels unchanged (the scale rounded twice, as torchvision's
//     255 / tensor computes it, so max - min = 61 sends the maximum to 254);
//   - Equalize is per-channel histogram equalisation as PIL and torchvision do it: step = (pixel
//     count - count of the last occupied level) / 255, floored; lut[0] = 0 and lut[i] =
//     (cdf[i - 1] + step / 2) / step (integer division, at most 255); a channel with step 0 is
//     left as it is.
#pragma once
#include <array>
#include <string>
#include <vector>

#include "data/transforms.h"

namespace cnn::data {

// torchvision's op space, in its order (the index drawn selects the op).
enum class AugmentOp {
  identity,
  shear_x,
  shear_y,
  translate_x,
  translate_y,
  rotate,
  brightness,
  color,
  contrast,
  sharpness,
  posterize,
  solarize,
  autocontrast,
  equalize,
};

// One op with its magnitude as torchvision's _apply_op receives it (sign applied): shear factor,
// translation in pixels (truncated toward zero when applied), degrees, enhancement factor minus
// one, bits (posterize) or threshold (solarize); 0 for the ops without one.
struct AugmentStep {
  AugmentOp op = AugmentOp::identity;
  double magnitude = 0;
  bool operator==(const AugmentStep&) const = default;
};

class RandAugment : public Transform {
 public:
  static constexpr int kNumOps = 14;
  static constexpr int kNumBins = 31;  // magnitudes 0..30

  RandAugment(int num_ops = 2, int magnitude = 9);
  Image apply(Image image, SampleRng& rng) const override;
  std::string name() const override;  // "RandAugment(2, 9)"

  // The ops of one sample of image_h x image_w: per op an index uniform in 0..13, then a sign
  // draw (negative with probability 1/2) for the signed ops only, as torchvision draws them.
  std::vector<AugmentStep> sample_ops(int image_h, int image_w, SampleRng& rng) const;

  static const char* op_name(AugmentOp op);  // torchvision's name: "ShearX", "AutoContrast", ...
  static bool is_signed(AugmentOp op);
  // The unsigned magnitude of `op` at `bin` (0..30) for an image of image_h x image_w.
  static double magnitude(AugmentOp op, int bin, int image_h, int image_w);
  // Applies one op (torchvision's _apply_op).
  static Image apply_op(Image image, const AugmentStep& step);

  // The ops themselves, on 1- or 3-channel images.
  static Image shear_x(const Image& image, double factor);
  static Image shear_y(const Image& image, double factor);
  static Image translate(const Image& image, int dx, int dy);  // content moves by (+dx, +dy)
  static Image rotate(const Image& image, double degrees);     // counter-clockwise about the centre
  // Nearest-neighbour warp: output pixel (x, y) reads the source pixel nearest (half to even) to
  // (a X + b Y + c + (w-1)/2, d X + e Y + f + (h-1)/2), where X = x - (w-1)/2, Y = y - (h-1)/2
  // and inverse = {a, b, c, d, e, f}; 0 where that is outside the image. Evaluated in float32 as
  // torchvision's affine grid and grid_sample evaluate it.
  static Image warp_nearest(const Image& image, const std::array<double, 6>& inverse);
  static Image brightness(Image image, double factor);
  static Image color(Image image, double factor);
  static Image contrast(Image image, double factor);
  static Image sharpness(Image image, double factor);
  static Image posterize(Image image, int bits);
  static Image solarize(Image image, double threshold);
  static Image autocontrast(Image image);
  static Image equalize(Image image);

 private:
  int num_ops_, magnitude_;
};

}  // namespace cnn::data
