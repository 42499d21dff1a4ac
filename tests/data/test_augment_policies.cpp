// RandAugment and RandomErasing against hand-computed expectations: torchvision's magnitude table;
// each op on tiny images (warps by known shears, shifts and angles; blends, posterize bits,
// solarize thresholds, autocontrast, equalisation of known histograms, sharpness at the border);
// the op and box draws as a pure function of (seed, epoch, sample) in torchvision's order; erased
// boxes exactly 0 after normalisation with everything else untouched; and loader batches that
// stay bitwise identical on 1, 2 and 4 workers with both enabled.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>

#include "data/loader.h"
#include "data/randaugment.h"
#include "data/transforms.h"
#include "fixtures.h"

using namespace cnn;
using namespace cnn::data;
using namespace cnn::data::test;

namespace {
using RA = RandAugment;

Image from_rows(int h, int w, int c, std::vector<uint8_t> values) {
  Image image(h, w, c);
  REQUIRE(values.size() == image.pixels.size());
  image.pixels = std::move(values);
  return image;
}

// Expected result of a warp given as: output (y, x) reads source (sy, sx), or 0 when outside.
template <class Source>
Image expected_warp(const Image& in, Source source) {
  Image out(in.height, in.width, in.channels);
  for (int y = 0; y < in.height; ++y)
    for (int x = 0; x < in.width; ++x) {
      const auto [sy, sx] = source(y, x);
      if (sy < 0 || sy >= in.height || sx < 0 || sx >= in.width) continue;
      for (int c = 0; c < in.channels; ++c) out.at(y, x, c) = in.at(sy, sx, c);
    }
  return out;
}

std::vector<uint8_t> blend_op(Image (*op)(Image, double), const Image& in, double factor) {
  return op(in, factor).pixels;
}

// Images of assorted sizes, labels i % 3.
class VariedDataset : public Dataset {
 public:
  explicit VariedDataset(int64_t n) : n_(n) { class_names_ = {"a", "b", "c"}; }
  int64_t size() const override { return n_; }
  int64_t label(int64_t i) const override { return i % 3; }
  Image load(int64_t i, const DecodeOptions& options) const override {
    return pattern_image(20 + static_cast<int>(i % 5) * 3, 22 + static_cast<int>(i % 4) * 5, options.channels,
                         static_cast<int>(i) * 17);
  }
  std::string source(int64_t i) const override { return "varied[" + std::to_string(i) + "]"; }

 private:
  int64_t n_;
};

Pipeline policy_pipeline(double erase_probability) {
  Pipeline p({std::make_shared<RandomResizedCrop>(16, 16), std::make_shared<RandomHorizontalFlip>(),
              std::make_shared<RandAugment>(2, 9)},
             16, 16, 3, Normalize::imagenet());
  p.set_random_erasing(RandomErasing{erase_probability});
  return p;
}
}  // namespace

// ---- the op space ----

TEST_CASE("RandAugment: torchvision's op names, signs and magnitude bins") {
  const std::vector<std::string> names = {"Identity", "ShearX",    "ShearY",     "TranslateX",   "TranslateY",
                                          "Rotate",   "Brightness", "Color",     "Contrast",     "Sharpness",
                                          "Posterize", "Solarize",  "AutoContrast", "Equalize"};
  int signed_ops = 0;
  for (int i = 0; i < RA::kNumOps; ++i) {
    CHECK(RA::op_name(static_cast<AugmentOp>(i)) == names[static_cast<size_t>(i)]);
    signed_ops += RA::is_signed(static_cast<AugmentOp>(i));
  }
  CHECK(signed_ops == 9);  // the geometric and the four enhancement ops
  CHECK_FALSE(RA::is_signed(AugmentOp::posterize));
  CHECK_FALSE(RA::is_signed(AugmentOp::solarize));

  CHECK(RA::magnitude(AugmentOp::shear_x, 30, 10, 10) == static_cast<double>(0.3f));
  CHECK(RA::magnitude(AugmentOp::shear_y, 10, 10, 10) == doctest::Approx(0.1).epsilon(1e-6));
  CHECK(RA::magnitude(AugmentOp::rotate, 9, 10, 10) == 9.0);
  CHECK(RA::magnitude(AugmentOp::rotate, 30, 10, 10) == 30.0);
  CHECK(RA::magnitude(AugmentOp::translate_x, 30, 100, 331) == 150.0);  // 150 / 331 of the width
  CHECK(RA::magnitude(AugmentOp::translate_y, 30, 331, 100) == 150.0);  // ... of the height
  CHECK(RA::magnitude(AugmentOp::translate_x, 6, 100, 331) == 30.0);
  CHECK(RA::magnitude(AugmentOp::translate_x, 30, 224, 224) == doctest::Approx(101.5106).epsilon(1e-6));
  CHECK(RA::magnitude(AugmentOp::brightness, 30, 8, 8) == static_cast<double>(0.9f));
  CHECK(RA::magnitude(AugmentOp::sharpness, 15, 8, 8) == doctest::Approx(0.45).epsilon(1e-6));
  // torch.linspace's CPU kernel computes each value as one fused multiply-add: bin 20 of 0..0.9 is
  // 0.9 - 0.03 * 10 rounded once, 0.59999996 (the float below 0.6f), not 0.6f; and it matters:
  // Brightness at factor 1.59999996 takes 5 to 7.9999998, truncated to 7 (at 1.6f it would be 8).
  const float below_0_6 = std::nextafter(0.6f, 0.0f);
  for (AugmentOp op : {AugmentOp::brightness, AugmentOp::color, AugmentOp::contrast, AugmentOp::sharpness})
    CHECK(RA::magnitude(op, 20, 8, 8) == static_cast<double>(below_0_6));
  const AugmentStep bright_20{AugmentOp::brightness, RA::magnitude(AugmentOp::brightness, 20, 1, 4)};
  CHECK(RA::apply_op(from_rows(1, 4, 1, {5, 10, 100, 255}), bright_20).pixels == std::vector<uint8_t>{7, 15, 159, 255});
  CHECK(RA::magnitude(AugmentOp::solarize, 0, 8, 8) == 255.0);
  CHECK(RA::magnitude(AugmentOp::solarize, 1, 8, 8) == 246.5);
  CHECK(RA::magnitude(AugmentOp::solarize, 30, 8, 8) == 0.0);
  CHECK(RA::magnitude(AugmentOp::identity, 30, 8, 8) == 0.0);
  CHECK(RA::magnitude(AugmentOp::equalize, 30, 8, 8) == 0.0);
  // 8 - round(arange(31) / 7.5): torchvision's posterize bits.
  const std::vector<int> bits = {8, 8, 8, 8, 7, 7, 7, 7, 7, 7, 7, 7, 6, 6, 6, 6, 6, 6, 6, 5, 5, 5, 5, 5, 5, 5, 5, 4, 4, 4, 4};
  for (int bin = 0; bin < RA::kNumBins; ++bin)
    CHECK(RA::magnitude(AugmentOp::posterize, bin, 8, 8) == bits[static_cast<size_t>(bin)]);

  CHECK(RandAugment(2, 9).name() == "RandAugment(2, 9)");
  CHECK(error_message([] { RandAugment(2, 31); }).find("magnitude 31 must be in [0, 30]") != std::string::npos);
  CHECK(error_message([] { RandAugment(-1, 3); }).find("num_ops -1") != std::string::npos);
}

// ---- geometric ops ----

TEST_CASE("RandAugment translate: content moves by whole pixels, fill 0, magnitudes truncated") {
  const Image in = pattern_image(4, 5, 3, 1);
  CHECK(max_abs_diff(RA::translate(in, 2, 0), expected_warp(in, [](int y, int x) { return std::pair{y, x - 2}; })) ==
        0);
  CHECK(max_abs_diff(RA::translate(in, 0, -1), expected_warp(in, [](int y, int x) { return std::pair{y + 1, x}; })) ==
        0);
  CHECK(max_abs_diff(RA::translate(in, -3, 2),
                     expected_warp(in, [](int y, int x) { return std::pair{y - 2, x + 3}; })) == 0);
  CHECK(RA::translate(in, 2, 0).at(3, 1, 2) == 0);  // the fill
  // int(magnitude) as torchvision: 1.7 -> 1, -1.7 -> -1.
  CHECK(max_abs_diff(RA::apply_op(in, {AugmentOp::translate_x, 1.7}), RA::translate(in, 1, 0)) == 0);
  CHECK(max_abs_diff(RA::apply_op(in, {AugmentOp::translate_y, -1.7}), RA::translate(in, 0, -1)) == 0);
  CHECK(max_abs_diff(RA::apply_op(in, {AugmentOp::translate_x, 0.9}), in) == 0);
}

TEST_CASE("RandAugment shears about the top-left corner (torchvision's center=[0, 0])") {
  const Image in = pattern_image(4, 4, 3, 3);
  // ShearX 0.3: output (y, x) reads x + 0.3 (y + 0.5) rounded: +0.15, +0.45 -> rows 0 and 1 kept;
  // +0.75, +1.05 -> rows 2 and 3 read one column to the right.
  const Image sx = RA::shear_x(in, 0.3);
  CHECK(max_abs_diff(sx, expected_warp(in, [](int y, int x) { return std::pair{y, x + (y >= 2 ? 1 : 0)}; })) == 0);
  CHECK(sx.at(3, 3, 0) == 0);
  CHECK(sx.at(1, 3, 0) == in.at(1, 3, 0));
  const Image sx_neg = RA::shear_x(in, -0.3);
  CHECK(max_abs_diff(sx_neg, expected_warp(in, [](int y, int x) { return std::pair{y, x - (y >= 2 ? 1 : 0)}; })) ==
        0);
  // ShearY 0.3: columns 2 and 3 read one row down.
  const Image sy = RA::shear_y(in, 0.3);
  CHECK(max_abs_diff(sy, expected_warp(in, [](int y, int x) { return std::pair{y + (x >= 2 ? 1 : 0), x}; })) == 0);
  // A steeper shear of a taller image: offsets 0.5 (y + 0.5) = 0.25, 0.75, 1.25, 1.75, 2.25 -> 0, 1, 1, 2, 2.
  const Image tall = pattern_image(5, 6, 1, 9);
  const int offset[5] = {0, 1, 1, 2, 2};
  CHECK(max_abs_diff(RA::shear_x(tall, 0.5),
                     expected_warp(tall, [&](int y, int x) { return std::pair{y, x + offset[y]}; })) == 0);
  // apply_op passes the signed magnitude through.
  CHECK(max_abs_diff(RA::apply_op(in, {AugmentOp::shear_x, -0.3}), sx_neg) == 0);
  CHECK(max_abs_diff(RA::apply_op(in, {AugmentOp::shear_y, 0.3}), sy) == 0);
}

TEST_CASE("RandAugment rotate: counter-clockwise about the centre, nearest, fill 0") {
  // 90 degrees (beyond RandAugment's 30, but exact): output (y, x) reads source (x, 2 - y).
  const Image small = pattern_image(3, 3, 1, 5);
  CHECK(max_abs_diff(RA::rotate(small, 90), expected_warp(small, [](int y, int x) { return std::pair{x, 2 - y}; })) ==
        0);
  // 30 degrees on 5x5: source = R(30) (X, Y) about (2, 2), rounded. Hand-computed:
  //   (0, 2): X=0, Y=-2 -> (1, -1.732) -> column 3, row 0     (2, 0): (-1.732, -1) -> column 0, row 1
  //   (2, 4): (1.732, 1) -> column 4, row 3                   (4, 2): (-1, 1.732) -> column 1, row 4
  //   (0, 0): (-0.732, -2.732) -> row -1: fill               (4, 4): (0.732, 2.732) -> row 5: fill
  const Image in = pattern_image(5, 5, 3, 2);
  const Image r = RA::rotate(in, 30);
  for (int c = 0; c < 3; ++c) {
    CHECK(r.at(2, 2, c) == in.at(2, 2, c));
    CHECK(r.at(0, 2, c) == in.at(0, 3, c));
    CHECK(r.at(2, 0, c) == in.at(1, 0, c));
    CHECK(r.at(2, 4, c) == in.at(3, 4, c));
    CHECK(r.at(4, 2, c) == in.at(4, 1, c));
    CHECK(r.at(0, 0, c) == 0);
    CHECK(r.at(4, 4, c) == 0);
  }
  // -30 degrees mirrors it: (0, 2) reads column 1.
  CHECK(RA::rotate(in, -30).at(0, 2, 0) == in.at(0, 1, 0));
  CHECK(max_abs_diff(RA::apply_op(in, {AugmentOp::rotate, 30.0}), r) == 0);
}

TEST_CASE("RandAugment warps round exact half pixels the way torchvision's float32 grid does") {
  // Pixel values 1.. in row-major order, so a value names the source pixel it came from.
  const auto numbered = [](int h, int w) {
    Image image(h, w, 1);
    for (size_t i = 0; i < image.pixels.size(); ++i) image.pixels[i] = static_cast<uint8_t>(i + 1);
    return image;
  };
  // Rotate 30 (bin 30) on 5x7: output (2, 0) is X = -3, Y = 0 about the centre, whose source row is
  // 2 + sin(30) (-3) = 0.5 exactly. torchvision's float32 grid lands on 0.49999994 and reads row 0
  // (a grid in double lands on 0.5000000000000002 and reads row 1). -30 mirrors it at (2, 6).
  const Image in = numbered(5, 7);
  CHECK(RA::rotate(in, 30).pixels == std::vector<uint8_t>{0, 0,  4,  5,  13, 14, 0,   //
                                                          2, 3,  11, 12, 19, 20, 28,  //
                                                          1, 9,  17, 18, 19, 27, 35,  //
                                                          8, 16, 17, 24, 25, 33, 34,  //
                                                          0, 22, 23, 31, 32, 0,  0});
  CHECK(RA::rotate(in, -30).at(2, 6, 0) == 7);
  CHECK(RA::apply_op(in, {AugmentOp::rotate, -30.0}).at(2, 6, 0) == 7);
  // ShearX 1 on 3x3 reads x + y + 0.5: every source column is a half. Output (0, 1) reads 1.5; in
  // float32 theta[0][1] = 1 / 1.5 = 0.6666667 (rounded up), g = -0.6666667 + 1 = 0.3333333 and
  // (g + 1) 1.5 - 0.5 = 1.4999999: column 1, where rounding 1.5 half to even would give column 2.
  const Image small = numbered(3, 3);
  CHECK(RA::shear_x(small, 1.0).pixels == std::vector<uint8_t>{1, 2, 3, 5, 6, 0, 9, 0, 0});
}

TEST_CASE("RandAugment at magnitude 0: the geometric ops are the identity") {
  const Image in = pattern_image(7, 9, 3, 4);
  for (AugmentOp op : {AugmentOp::shear_x, AugmentOp::shear_y, AugmentOp::translate_x, AugmentOp::translate_y,
                       AugmentOp::rotate, AugmentOp::identity})
    for (double sign : {1.0, -1.0}) {
      const double m = sign * RA::magnitude(op, 0, in.height, in.width);
      CHECK_MESSAGE(max_abs_diff(RA::apply_op(in, {op, m}), in) == 0, RA::op_name(op));
    }
  // ... and so are the enhancement ops (factor 1) and Posterize (8 bits).
  for (AugmentOp op : {AugmentOp::brightness, AugmentOp::color, AugmentOp::contrast, AugmentOp::sharpness,
                       AugmentOp::posterize})
    CHECK_MESSAGE(max_abs_diff(RA::apply_op(in, {op, RA::magnitude(op, 0, 7, 9)}), in) == 0, RA::op_name(op));
  // RandAugment(3, 0) draws only zero magnitudes for them (Solarize at 255 and Posterize at 8).
  const RandAugment ra(3, 0);
  for (uint64_t s = 0; s < 50; ++s) {
    SampleRng rng(2, 0, s);
    for (const AugmentStep& step : ra.sample_ops(7, 9, rng))
      REQUIRE(step.magnitude == (step.op == AugmentOp::solarize ? 255.0 : step.op == AugmentOp::posterize ? 8.0 : 0.0));
  }
}

// ---- colour ops ----

TEST_CASE("RandAugment Brightness, Color, Contrast: torchvision's float32 blends, truncated") {
  const Image two = from_rows(1, 2, 3, {200, 100, 50, 10, 20, 30});
  // Brightness blends with black: f x, clamped, truncated (4.5 -> 4).
  CHECK(blend_op(RA::brightness, from_rows(1, 3, 1, {100, 200, 3}), 1.5) == std::vector<uint8_t>{150, 255, 4});
  CHECK(blend_op(RA::brightness, from_rows(1, 3, 1, {100, 200, 3}), 0.5) == std::vector<uint8_t>{50, 100, 1});
  // Color blends with the 8-bit grayscale: trunc(124.18) = 124 and trunc(18.149) = 18.
  CHECK(blend_op(RA::color, two, 0.0) == std::vector<uint8_t>{124, 124, 124, 18, 18, 18});
  CHECK(blend_op(RA::color, two, 2.0) == std::vector<uint8_t>{255, 76, 0, 2, 22, 42});
  CHECK(blend_op(RA::color, two, 0.5) == std::vector<uint8_t>{162, 112, 87, 14, 19, 24});
  CHECK(blend_op(RA::color, from_rows(1, 2, 1, {10, 250}), 0.0) == std::vector<uint8_t>{10, 250});  // 1 channel: as is
  // Contrast blends with the mean of the 8-bit grayscale, (124 + 18) / 2 = 71: 0.5 x + 35.5, truncated.
  CHECK(blend_op(RA::contrast, two, 0.0) == std::vector<uint8_t>{71, 71, 71, 71, 71, 71});
  CHECK(blend_op(RA::contrast, two, 0.5) == std::vector<uint8_t>{135, 85, 60, 40, 45, 50});
  // One channel: the mean of the pixels (30): 2 x - 30.
  CHECK(blend_op(RA::contrast, from_rows(1, 3, 1, {10, 20, 60}), 2.0) == std::vector<uint8_t>{0, 10, 90});
  // The signed magnitude m becomes the factor 1 + m.
  CHECK(RA::apply_op(two, {AugmentOp::brightness, -0.5}).pixels == blend_op(RA::brightness, two, 0.5));
  CHECK(RA::apply_op(two, {AugmentOp::color, 1.0}).pixels == blend_op(RA::color, two, 2.0));
  CHECK(RA::apply_op(two, {AugmentOp::contrast, -0.5}).pixels == blend_op(RA::contrast, two, 0.5));
}

TEST_CASE("RandAugment Sharpness: 3x3 smoothing (rounded) inside, the border left alone") {
  // Background 20, a spike of 157 at (1, 1). Smoothed: (1, 1) = (8*20 + 157 + 4*157) / 13 =
  // 945 / 13 = 72.7 -> 73 (rounded, not truncated); its interior neighbours (7*20 + 157 + 5*20) / 13
  // = 397 / 13 = 30.5 -> 31. The border pixels next to the spike are not smoothed.
  Image spike(4, 4, 1);
  spike.pixels.assign(16, 20);
  spike.at(1, 1, 0) = 157;
  CHECK(blend_op(RA::sharpness, spike, 0.0) ==
        std::vector<uint8_t>{20, 20, 20, 20, 20, 73, 31, 20, 20, 31, 31, 20, 20, 20, 20, 20});
  // Factor 2: 2 x - smooth (314 - 73 = 241, 40 - 31 = 9); the border stays 20.
  CHECK(blend_op(RA::sharpness, spike, 2.0) ==
        std::vector<uint8_t>{20, 20, 20, 20, 20, 241, 9, 20, 20, 9, 9, 20, 20, 20, 20, 20});
  // Per channel on 3 channels: the same numbers in channel 1, channel 0 and 2 flat.
  Image rgb(4, 4, 3);
  for (size_t i = 0; i < 16; ++i) rgb.pixels[3 * i] = 7, rgb.pixels[3 * i + 1] = spike.pixels[i], rgb.pixels[3 * i + 2] = 90;
  const Image sharp = RA::sharpness(rgb, 2.0);
  for (size_t i = 0; i < 16; ++i) {
    REQUIRE(sharp.pixels[3 * i] == 7);
    REQUIRE(sharp.pixels[3 * i + 1] == RA::sharpness(spike, 2.0).pixels[i]);
    REQUIRE(sharp.pixels[3 * i + 2] == 90);
  }
  // Images under 3x3 have no interior: unchanged.
  const Image thin = pattern_image(2, 6, 3);
  CHECK(max_abs_diff(RA::sharpness(thin, 0.0), thin) == 0);
  // torchvision's float32 _blend truncates: at factor 1 + 0.03 (bin 1) 1.03 * 5 - 0.03 * 5 is
  // 4.9999995 in float32, so even a flat image loses a level, exactly as it does there.
  const double factor = 1.0 + RA::magnitude(AugmentOp::sharpness, 1, 4, 4);
  CHECK(RA::sharpness(constant_image(4, 4, 1, 5), factor).pixels == std::vector<uint8_t>(16, 4));
  CHECK(RA::sharpness(constant_image(4, 4, 1, 6), factor).pixels == std::vector<uint8_t>(16, 6));
}

TEST_CASE("RandAugment Posterize keeps the top bits, Solarize inverts from the threshold up") {
  const Image px = from_rows(1, 4, 1, {255, 200, 17, 8});
  CHECK(RA::posterize(px, 4).pixels == std::vector<uint8_t>{240, 192, 16, 0});
  CHECK(RA::posterize(px, 1).pixels == std::vector<uint8_t>{128, 128, 0, 0});
  CHECK(RA::posterize(px, 0).pixels == std::vector<uint8_t>{0, 0, 0, 0});
  CHECK(RA::posterize(px, 8).pixels == px.pixels);
  CHECK(RA::apply_op(px, {AugmentOp::posterize, 5.0}).pixels == std::vector<uint8_t>{248, 200, 16, 8});

  const Image ramp = from_rows(1, 6, 1, {0, 127, 128, 200, 246, 255});
  CHECK(RA::solarize(ramp, 128).pixels == std::vector<uint8_t>{0, 127, 127, 55, 9, 0});
  CHECK(RA::solarize(ramp, 246.5).pixels == std::vector<uint8_t>{0, 127, 128, 200, 246, 0});
  CHECK(RA::solarize(ramp, 0).pixels == std::vector<uint8_t>{255, 128, 127, 55, 9, 0});
  CHECK(RA::apply_op(ramp, {AugmentOp::solarize, 255.0}).pixels == std::vector<uint8_t>{0, 127, 128, 200, 246, 0});
}

TEST_CASE("RandAugment AutoContrast stretches each channel's min..max to 0..255") {
  // Channel 0: 50..150, scale 2.55: 0, 127 (127.5 truncated), 255. Channel 1 constant: unchanged.
  // Channel 2: 10..30, scale 12.75: 0, 127, 255.
  const Image in = from_rows(1, 3, 3, {50, 7, 10, 100, 7, 20, 150, 7, 30});
  CHECK(RA::autocontrast(in).pixels == std::vector<uint8_t>{0, 7, 0, 127, 7, 127, 255, 7, 255});
  const Image full = from_rows(1, 3, 1, {0, 99, 255});
  CHECK(RA::autocontrast(full).pixels == full.pixels);
  CHECK(RA::apply_op(in, {AugmentOp::autocontrast, 0}).pixels == RA::autocontrast(in).pixels);
  // torchvision's scale 255 / (max - min) is the float32 reciprocal times 255, rounded twice: for a
  // range of 61 it is 4.1803274 (one step under 255 / 61 = 4.180328) and 61 of it is 254.99997,
  // truncated to 254; for a range of 7 it is 36.428574 and 7 of it 255.00002 (255 / 7 alone would
  // give 36.42857 and 254.99998). Middle values: 30 x 4.1803274 = 125.4 and 1 x 36.428574.
  CHECK(RA::autocontrast(from_rows(1, 3, 1, {10, 40, 71})).pixels == std::vector<uint8_t>{0, 125, 254});
  CHECK(RA::autocontrast(from_rows(1, 3, 1, {3, 4, 10})).pixels == std::vector<uint8_t>{0, 36, 255});
}

TEST_CASE("RandAugment Equalize: PIL's per-channel histogram equalisation on known histograms") {
  // 30 x 34 = 1020 pixels. Channel 0: 255 each of 10, 20, 30, 40 -> step (1020 - 255) / 255 = 3,
  // lut = (cdf before + 1) / 3: 10 -> 0, 20 -> 85, 30 -> 170, 40 -> 255.
  // Channel 1: constant -> step 0 -> unchanged. Channel 2: 510 of 0, 255 of 100, 255 of 200 ->
  // step 3: 0 -> 0, 100 -> (510 + 1) / 3 = 170, 200 -> (765 + 1) / 3 = 255.
  Image in(30, 34, 3);
  for (size_t i = 0; i < 1020; ++i) {
    in.pixels[3 * i] = static_cast<uint8_t>(10 * (1 + i % 4));
    in.pixels[3 * i + 1] = 77;
    in.pixels[3 * i + 2] = static_cast<uint8_t>(i < 510 ? 0 : i < 765 ? 100 : 200);
  }
  const Image eq = RA::equalize(in);
  const std::map<int, int> lut0 = {{10, 0}, {20, 85}, {30, 170}, {40, 255}}, lut2 = {{0, 0}, {100, 170}, {200, 255}};
  for (size_t i = 0; i < 1020; ++i) {
    REQUIRE(eq.pixels[3 * i] == lut0.at(in.pixels[3 * i]));
    REQUIRE(eq.pixels[3 * i + 1] == 77);
    REQUIRE(eq.pixels[3 * i + 2] == lut2.at(in.pixels[3 * i + 2]));
  }
  // Fewer than 255 pixels outside the top level: step 0, unchanged (as PIL and torchvision).
  const Image small = pattern_image(8, 8, 3);
  CHECK(max_abs_diff(RA::equalize(small), small) == 0);
  // An uneven histogram: 303 of 0, 800 of 50, 197 of 60 -> step (1300 - 197) / 255 = 4:
  // 0 -> 0, 50 -> (303 + 2) / 4 = 76 (the half step rounds 75.75 up), 60 -> (1103 + 2) / 4 -> 255.
  Image uneven(1, 1300, 1);
  for (size_t i = 0; i < 1300; ++i) uneven.pixels[i] = static_cast<uint8_t>(i < 303 ? 0 : i < 1103 ? 50 : 60);
  const Image ue = RA::equalize(uneven);
  CHECK(ue.pixels[0] == 0);
  CHECK(ue.pixels[303] == 76);
  CHECK(ue.pixels[1299] == 255);
}

// ---- the draws ----

TEST_CASE("RandAugment draws: torchvision's order, a pure function of (seed, epoch, sample), all 14 ops") {
  const RandAugment ra(2, 9);
  std::map<AugmentOp, int> count;
  std::map<AugmentOp, int> negative;
  for (uint64_t s = 0; s < 1400; ++s) {
    SampleRng rng(11, 2, s), again(11, 2, s), replay(11, 2, s);
    const std::vector<AugmentStep> steps = ra.sample_ops(32, 48, rng);
    REQUIRE(steps.size() == 2);
    REQUIRE(ra.sample_ops(32, 48, again) == steps);
    // The same draws by hand: an index in 0..13, then a coin for the signed ops only.
    for (const AugmentStep& step : steps) {
      const auto op = static_cast<AugmentOp>(replay.integer(0, 13));
      REQUIRE(step.op == op);
      const double m = RA::magnitude(op, 9, 32, 48);
      REQUIRE(step.magnitude == ((RA::is_signed(op) && replay.bernoulli(0.5)) ? -m : m));
      ++count[op];
      negative[op] += step.magnitude < 0;
    }
  }
  REQUIRE(count.size() == 14);
  for (const auto& [op, n] : count) {
    CHECK_MESSAGE(n > 140, RA::op_name(op));  // 200 expected of each
    CHECK_MESSAGE(n < 260, RA::op_name(op));
    if (RA::is_signed(op)) {
      CHECK_MESSAGE(negative[op] > n / 4, RA::op_name(op));
      CHECK_MESSAGE(negative[op] < 3 * n / 4, RA::op_name(op));
    } else {
      CHECK(negative[op] == 0);
    }
  }
  // Other samples and epochs draw other ops.
  int differing = 0;
  for (uint64_t s = 0; s < 20; ++s) {
    SampleRng a(11, 2, s), b(11, 3, s);
    differing += ra.sample_ops(32, 48, a) != ra.sample_ops(32, 48, b);
  }
  CHECK(differing >= 15);
  // apply() is the drawn ops in order, and the same bits for the same key.
  const Image in = smooth_image(32, 48, 3, 5);
  for (uint64_t s = 0; s < 30; ++s) {
    SampleRng r1(4, 1, s), r2(4, 1, s), r3(4, 1, s);
    Image expected = in;
    for (const AugmentStep& step : ra.sample_ops(32, 48, r2)) expected = RA::apply_op(expected, step);
    const Image got = ra.apply(in, r1);
    REQUIRE(max_abs_diff(got, expected) == 0);
    REQUIRE(max_abs_diff(ra.apply(in, r3), got) == 0);
  }
  Image gray = smooth_image(16, 16, 1);
  SampleRng rng(0, 0, 0);
  CHECK(RandAugment(4, 30).apply(gray, rng).channels == 1);
  CHECK(error_message([&] { RandAugment(1, 5).apply(Image(4, 4, 2), rng); }).find("1 or 3 channels") !=
        std::string::npos);
}

// ---- random erasing ----

TEST_CASE("RandomErasing boxes: inside the image, area and ratio in range, p = 0 never, p = 1 always") {
  const RandomErasing always{1.0}, never{0.0}, half{0.5};
  int erased_half = 0;
  for (uint64_t s = 0; s < 500; ++s) {
    SampleRng rng(8, 1, s), r0(8, 1, s), r5(8, 1, s);
    const std::optional<Box> box = always.sample_box(224, 200, rng);
    REQUIRE(box.has_value());
    REQUIRE(box->top >= 0);
    REQUIRE(box->left >= 0);
    REQUIRE(box->height < 224);  // strictly smaller, as torchvision requires
    REQUIRE(box->width < 200);
    REQUIRE(box->top + box->height <= 224);
    REQUIRE(box->left + box->width <= 200);
    const double area = double(box->height) * box->width / (224.0 * 200.0);
    REQUIRE(area >= 0.02 * 0.95);  // sides rounded to whole pixels
    REQUIRE(area <= 0.33 * 1.05);
    const double ratio = double(box->height) / box->width;  // height / width in torchvision
    REQUIRE(ratio >= 0.3 * 0.95);
    REQUIRE(ratio <= 3.3 * 1.05);
    REQUIRE_FALSE(never.sample_box(224, 200, r0).has_value());
    erased_half += half.sample_box(224, 200, r5).has_value();
  }
  CHECK(erased_half > 200);
  CHECK(erased_half < 300);
  // The draws in torchvision's order: coin, area, log ratio, then top and left.
  SampleRng rng(3, 0, 7), replay(3, 0, 7);
  const std::optional<Box> box = always.sample_box(100, 120, rng);
  REQUIRE(replay.uniform() < 1.0);
  const double area = 100.0 * 120.0 * replay.uniform(0.02, 0.33);
  const double aspect = std::exp(replay.uniform(std::log(0.3), std::log(3.3)));
  const int h = static_cast<int>(std::nearbyint(std::sqrt(area * aspect)));
  const int w = static_cast<int>(std::nearbyint(std::sqrt(area / aspect)));
  if (h < 100 && w < 120) {  // this key's first try fits
    const int top = static_cast<int>(replay.integer(0, 100 - h)), left = static_cast<int>(replay.integer(0, 120 - w));
    CHECK(*box == Box{top, left, h, w});
  }
  // No box smaller than a 10x10 image of area fraction 1: ten tries, then nothing (torchvision
  // returns the image as it is).
  const RandomErasing whole{1.0, {1.0, 1.0}, {1.0, 1.0}};
  SampleRng r(0, 0, 0);
  CHECK_FALSE(whole.sample_box(10, 10, r).has_value());
  CHECK(error_message([] { RandomErasing{1.5}.check(); }).find("probability 1.5") != std::string::npos);
  CHECK(error_message([] { RandomErasing{0.5, {0.4, 0.2}}.check(); }).find("scale") != std::string::npos);
}

TEST_CASE("erase_box writes zeros into the box of a slot in every dtype, and nothing else") {
  const Box box{1, 2, 2, 3};  // rows 1..2, columns 2..4 of a 4 x 6 x 3 slot
  auto in_box = [&](int64_t i) {
    const int64_t pixel = i / 3, y = pixel / 6, x = pixel % 6;
    return y >= 1 && y < 3 && x >= 2 && x < 5;
  };
  for (DType dt : {DType::f32, DType::f16, DType::bf16, DType::u8}) {
    const size_t bytes = static_cast<size_t>(dtype_size(dt));
    std::vector<uint8_t> slot(4 * 6 * 3 * bytes, 0xAB);
    erase_box(slot.data(), dt, box, 6, 3);
    for (int64_t i = 0; i < 4 * 6 * 3; ++i)
      for (size_t b = 0; b < bytes; ++b) REQUIRE(slot[static_cast<size_t>(i) * bytes + b] == (in_box(i) ? 0 : 0xAB));
  }
  CHECK(half_bits_to_float(0) == 0.0f);  // all-zero bits are 0.0
  CHECK(bf16_bits_to_float(0) == 0.0f);
  std::vector<uint8_t> slot(4 * 6 * 3 * 4);
  CHECK(error_message([&] { erase_box(slot.data(), DType::f32, Box{0, 4, 1, 3}, 6, 3); }).find("outside") !=
        std::string::npos);
}

TEST_CASE("Pipeline random erasing: after the transforms' draws, 0 after normalisation, the rest untouched") {
  const Image image = smooth_image(40, 50, 3, 2);
  Pipeline plain({std::make_shared<RandomResizedCrop>(24, 24), std::make_shared<RandAugment>(2, 9)}, 24, 24, 3,
                 Normalize::imagenet());
  Pipeline erasing = plain;
  erasing.set_random_erasing(RandomErasing{1.0});
  CHECK(erasing.describe() == "RandomResizedCrop + RandAugment(2, 9) + RandomErasing(1) after Normalize");
  CHECK(plain.random_erasing().probability == 0);
  int erased = 0;
  for (uint64_t s = 0; s < 40; ++s) {
    std::optional<Box> box, none;
    const Image a = erasing.run(image, 5, 1, s, "x", box);
    const Image b = plain.run(image, 5, 1, s, "x", none);
    REQUIRE_FALSE(none.has_value());
    REQUIRE(max_abs_diff(a, b) == 0);  // erasing draws last: the transforms see the same numbers
    REQUIRE(box.has_value());          // p = 1 (and a 24x24 image always fits a box within 10 tries here)
    // The box is the next draw of the same stream.
    SampleRng rng(5, 1, s);
    Image replayed = image;
    replayed = RandomResizedCrop(24, 24).apply(std::move(replayed), rng);
    replayed = RandAugment(2, 9).apply(std::move(replayed), rng);
    REQUIRE(RandomErasing{1.0}.sample_box(24, 24, rng) == box);
    for (DType dt : {DType::f32, DType::f16, DType::bf16}) {
      const size_t n = 24 * 24 * 3, bytes = static_cast<size_t>(dtype_size(dt));
      std::vector<uint8_t> got(n * bytes), clean(n * bytes);
      erasing.write(a, box, dt, got.data());
      write_sample(a, erasing.normalize(), dt, clean.data());
      for (int y = 0; y < 24; ++y)
        for (int x = 0; x < 24; ++x) {
          const bool inside = y >= box->top && y < box->top + box->height && x >= box->left && x < box->left + box->width;
          const size_t at = (static_cast<size_t>(y) * 24 + x) * 3 * bytes;
          if (inside) {
            for (size_t k = 0; k < 3 * bytes; ++k) REQUIRE(got[at + k] == 0);
            erased += dt == DType::f32;
          } else {
            REQUIRE(std::memcmp(&got[at], &clean[at], 3 * bytes) == 0);
          }
        }
    }
  }
  CHECK(erased > 40 * 24 * 24 * 0.02 * 0.9);
  // p = 0: nothing erased, and the short form of run works.
  Pipeline off = plain;
  off.set_random_erasing(RandomErasing{0.0});
  std::optional<Box> box = Box{1, 1, 1, 1};
  CHECK(max_abs_diff(off.run(image, 5, 1, 3, "x", box), off.run(image, 5, 1, 3, "x")) == 0);
  CHECK_FALSE(box.has_value());
  // The short form would lose the box: refused.
  CHECK(error_message([&] { erasing.run(image, 5, 1, 3, "cat.jpg"); }).find("cat.jpg: this pipeline erases") !=
        std::string::npos);
  CHECK(error_message([&] { off.set_random_erasing(RandomErasing{-0.1}); }).find("probability -0.1") !=
        std::string::npos);
}

// ---- the loader ----

TEST_CASE("loader with RandAugment and RandomErasing: bitwise identical on 1, 2 and 4 workers") {
  auto ds = std::make_shared<VariedDataset>(22);
  std::vector<std::vector<std::vector<uint8_t>>> runs;
  std::vector<std::vector<std::vector<int64_t>>> indices;
  for (int workers : {1, 2, 4}) {
    LoaderOptions o;
    o.batch_size = 4;
    o.workers = workers;
    o.seed = 99;
    Loader loader(ds, policy_pipeline(0.5), o);
    loader.start_epoch(3);
    runs.emplace_back();
    indices.emplace_back();
    while (auto b = loader.next()) {
      const auto* bytes = static_cast<const uint8_t*>(b->images.data());
      runs.back().emplace_back(bytes, bytes + b->images.nbytes());
      indices.back().push_back(b->indices);
    }
  }
  REQUIRE(runs[0].size() == 6);  // 22 = 5 * 4 + 2
  CHECK(runs[1] == runs[0]);
  CHECK(runs[2] == runs[0]);
  CHECK(indices[1] == indices[0]);
  CHECK(indices[2] == indices[0]);

  // Each sample is what the pipeline gives for (seed, epoch, index), erased box and all. ImageNet
  // normalisation never gives exactly 0 (255 mean is not a whole number), so zeros are erasures.
  const Pipeline pipeline = policy_pipeline(0.5);
  const size_t slot = 16 * 16 * 3;
  int erased_samples = 0, samples = 0;
  for (size_t k = 0; k < runs[0].size(); ++k)
    for (size_t j = 0; j < indices[0][k].size(); ++j, ++samples) {
      const int64_t index = indices[0][k][j];
      std::optional<Box> box;
      const Image image = pipeline.run(ds->load(index, pipeline.decode_options()), 99, 3,
                                       static_cast<uint64_t>(index), "x", box);
      std::vector<float> expected(slot);
      pipeline.write(image, box, DType::f32, expected.data());
      const auto* got = reinterpret_cast<const float*>(runs[0][k].data()) + j * slot;
      REQUIRE(std::memcmp(got, expected.data(), slot * sizeof(float)) == 0);
      const auto zeros = std::count(got, got + slot, 0.0f);
      REQUIRE(zeros == (box ? 3 * box->height * box->width : 0));
      erased_samples += box.has_value();
    }
  CHECK(erased_samples > 3);  // p = 0.5 of 22
  CHECK(erased_samples < samples - 3);

  LoaderOptions raw;
  raw.dtype = DType::u8;
  CHECK(error_message([&] { Loader(ds, policy_pipeline(0.5), raw); }).find("needs batch dtype f32, f16 or bf16") !=
        std::string::npos);
}
