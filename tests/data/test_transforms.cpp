// CPU transforms against hand-computed expectations: resampling weights, crop boxes, flips,
// normalisation, colour jitter at known factors; and that the draws are a pure function of
// (seed, epoch, sample), shared with the GPU crop kernel's reference.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "data/transforms.h"
#include "fixtures.h"
#include "kernels/augment.h"

using namespace cnn;
using namespace cnn::data;
using namespace cnn::data::test;

namespace {
Image row_image(std::vector<uint8_t> values) {
  Image image(1, static_cast<int>(values.size()), 1);
  image.pixels = std::move(values);
  return image;
}
}  // namespace

TEST_CASE("resample: antialiased shrink and bilinear enlarge, hand-computed") {
  // Shrinking 4 -> 2: radius 2, output 0 centred at 1.0 weighs inputs 0, 1, 2 by 0.75, 0.75, 0.25.
  const Image small = resample(row_image({0, 100, 200, 255}), {0, 0, 1, 4}, 1, 2);
  CHECK(small.pixels == std::vector<uint8_t>{71, 209});  // 125 / 1.75 and 366.25 / 1.75
  // Enlarging 2 -> 4: half-pixel centres, edges clamped.
  const Image big = resample(row_image({0, 100}), {0, 0, 1, 2}, 1, 4);
  CHECK(big.pixels == std::vector<uint8_t>{0, 25, 75, 100});
  // A constant image stays constant at any scale and box.
  const Image flat = constant_image(37, 53, 3, 77);
  const Image out = resample(flat, {3, 5, 30, 41}, 13, 29);
  CHECK(max_abs_diff(out, constant_image(13, 29, 3, 77)) == 0);
  // Identity size: unchanged.
  const Image pattern = pattern_image(9, 11, 3);
  CHECK(max_abs_diff(resample(pattern, {0, 0, 9, 11}, 9, 11), pattern) == 0);
  CHECK(error_message([&] { resample(pattern, {5, 0, 9, 11}, 4, 4); }).find("outside") != std::string::npos);
}

TEST_CASE("resample: a large photo to a small crop (30x and more) is box-reduced first, any size and ratio") {
  // Before: "shrinking 2000x2000 to 28x28 is beyond the filter's 30x limit; resize in steps".
  // A horizontal ramp against the exact antialiased result, computed in double without steps: the
  // triangle filter of radius 2000/28 input pixels centred on each output pixel, weights normalised
  // over the pixels inside the image. Within 2 levels (the block averages and the filter each round).
  Image ramp(2000, 2000, 3);
  for (int y = 0; y < 2000; ++y)
    for (int x = 0; x < 2000; ++x)
      for (int c = 0; c < 3; ++c) ramp.at(y, x, c) = static_cast<uint8_t>(std::lround(255.0 * x / 1999.0));
  const Image small = resample(ramp, {0, 0, 2000, 2000}, 28, 28);
  REQUIRE(small.height == 28);
  REQUIRE(small.width == 28);
  std::vector<double> exact(28);
  const double scale = 2000.0 / 28.0;
  for (int x = 0; x < 28; ++x) {
    const double centre = (x + 0.5) * scale;
    double sum = 0, weights = 0;
    for (int i = std::max(0, static_cast<int>(centre - scale) - 1); i < std::min(2000, static_cast<int>(centre + scale) + 1); ++i) {
      const double w = std::max(0.0, 1.0 - std::fabs((i + 0.5 - centre) / scale));
      sum += w * std::lround(255.0 * i / 1999.0);
      weights += w;
    }
    exact[static_cast<size_t>(x)] = sum / weights;
  }
  int worst = 0;
  for (int y = 0; y < 28; ++y)
    for (int x = 0; x < 28; ++x)
      worst = std::max(worst, std::abs(small.at(y, x, 1) - static_cast<int>(std::lround(exact[static_cast<size_t>(x)]))));
  CHECK(worst <= 2);
  // Mirrored is the mirror image; one very long side (1 x N), and a box inside a larger image.
  const Image mirrored = resample(ramp, {0, 0, 2000, 2000}, 28, 28, true);
  CHECK(mirrored.at(5, 0, 0) == small.at(5, 27, 0));
  Image line(1, 5000, 1);
  std::fill(line.pixels.begin(), line.pixels.end(), uint8_t{77});
  const Image short_line = resample(line, {0, 0, 1, 5000}, 1, 7);
  CHECK(short_line.pixels == std::vector<uint8_t>(7, 77));
  const Image corner = resample(ramp, {100, 1000, 1800, 999}, 20, 10);
  CHECK(corner.width == 10);
  CHECK(std::abs(corner.at(3, 0, 0) - static_cast<int>(std::lround(255.0 * (1000 + 49.95) / 1999.0))) <= 2);
}

TEST_CASE("Resize keeps the aspect ratio with the shorter side given (truncating the longer)") {
  CHECK(Resize::output_size(375, 500, 256) == std::array<int64_t, 2>{256, 341});
  CHECK(Resize::output_size(500, 375, 256) == std::array<int64_t, 2>{341, 256});
  // No wrap-around: 256 x 2^31-1 used to be computed into an int.
  CHECK(Resize::output_size(1, 2147483647, 256) == std::array<int64_t, 2>{256, 256LL * 2147483647});
  SampleRng rng(0, 0, 0);
  const Image out = Resize(256).apply(smooth_image(375, 500, 3), rng);
  CHECK(out.height == 256);
  CHECK(out.width == 341);
}

TEST_CASE("Resize of a long thin strip is a corrupt sample, not a 65 GB image") {
  // Before: 1 x 1,000,000 resized to a shorter side of 256 allocated 256 x 256,000,000 x 3 bytes.
  SampleRng rng(0, 0, 0);
  const std::string m = error_message([&] { Resize(256).apply(Image(1, 1000000, 1), rng); });
  CHECK(m.find("1x1000000x1 image: resizing its shorter side to 256 gives 256 x 256000000 pixels, more than the limit of") !=
        std::string::npos);
  CHECK(m.find("(an aspect ratio of 1000000:1); crop the image or remove it") != std::string::npos);
  CHECK_THROWS_AS(Resize(256).apply(Image(1000000, 1, 1), rng), CorruptImageError);
  // Just inside the limit it resizes: 1 x 1365 at 256 is 256 x 349,440 = 89,456,640 pixels.
  CHECK(Resize(256).apply(Image(1, 1365, 1), rng).width == 1365 * 256);
  CHECK_THROWS_AS(Resize(256).apply(Image(1, 1366, 1), rng), CorruptImageError);
  // In a pipeline the error names the file.
  const Pipeline pipeline({std::make_shared<Resize>(256), std::make_shared<CenterCrop>(8, 8)}, 8, 8, 1, Normalize::identity(1));
  CHECK(error_message([&] { pipeline.run(Image(1, 2000, 1), 0, 0, 0, "strip.png"); })
            .starts_with("strip.png: 1x2000x1 image: resizing its shorter side to 256"));
}

TEST_CASE("CenterCrop offsets round half to even, larger crops pad with zeros") {
  SampleRng rng(0, 0, 0);
  const Image image = pattern_image(5, 7, 1);
  const Image c = CenterCrop(3, 3).apply(image, rng);  // offsets (1, 2)
  CHECK(c.at(0, 0, 0) == image.at(1, 2, 0));
  CHECK(c.at(2, 2, 0) == image.at(3, 4, 0));
  const Image six = pattern_image(6, 6, 1);
  CHECK(CenterCrop(3, 3).apply(six, rng).at(0, 0, 0) == six.at(2, 2, 0));  // 1.5 rounds to 2
  const Image eight = pattern_image(8, 8, 1);
  CHECK(CenterCrop(3, 3).apply(eight, rng).at(0, 0, 0) == eight.at(2, 2, 0));  // 2.5 rounds to 2
  const Image padded = CenterCrop(4, 4).apply(pattern_image(2, 2, 1, 9), rng);  // offset -1
  CHECK(padded.at(0, 0, 0) == 0);
  CHECK(padded.at(1, 1, 0) == 9);
  CHECK(padded.at(3, 3, 0) == 0);
}

TEST_CASE("RandomCrop with padding: the window the draws name, zeros in the padding") {
  const Image image = pattern_image(8, 8, 3, 1);
  bool saw_padding = false;
  for (uint64_t sample = 0; sample < 20; ++sample) {
    SampleRng rng(5, 1, sample), again(5, 1, sample);
    const Image out = RandomCrop(8, 8, 2).apply(image, rng);
    const int top = static_cast<int>(again.integer(0, 4)), left = static_cast<int>(again.integer(0, 4));
    for (int y = 0; y < 8; ++y)
      for (int x = 0; x < 8; ++x) {
        const int iy = y + top - 2, ix = x + left - 2;
        const bool inside = iy >= 0 && iy < 8 && ix >= 0 && ix < 8;
        saw_padding |= !inside;
        REQUIRE(out.at(y, x, 1) == (inside ? image.at(iy, ix, 1) : 0));
      }
  }
  CHECK(saw_padding);
}

TEST_CASE("RandomHorizontalFlip mirrors columns, p = 0 and p = 1 are certain") {
  const Image image = pattern_image(3, 5, 3);
  SampleRng rng(1, 2, 3);
  const Image flipped = RandomHorizontalFlip(1.0).apply(image, rng);
  for (int y = 0; y < 3; ++y)
    for (int x = 0; x < 5; ++x)
      for (int c = 0; c < 3; ++c) REQUIRE(flipped.at(y, x, c) == image.at(y, 4 - x, c));
  CHECK(max_abs_diff(RandomHorizontalFlip(0.0).apply(image, rng), image) == 0);
  int flips = 0;
  for (uint64_t s = 0; s < 400; ++s) {
    SampleRng r(9, 0, s);
    flips += RandomHorizontalFlip(0.5).apply(image, r).at(0, 0, 0) != image.at(0, 0, 0);
  }
  CHECK(flips > 150);
  CHECK(flips < 250);
}

TEST_CASE("RandomResizedCrop samples torchvision's boxes and falls back to a centre crop") {
  const RandomResizedCrop rrc(224, 224);
  for (uint64_t s = 0; s < 200; ++s) {
    SampleRng rng(3, 0, s);
    const Box b = rrc.sample_box(375, 500, rng);
    REQUIRE(b.top >= 0);
    REQUIRE(b.left >= 0);
    REQUIRE(b.top + b.height <= 375);
    REQUIRE(b.left + b.width <= 500);
    const double area = double(b.height) * b.width / (375.0 * 500.0);
    REQUIRE(area > 0.075);
    REQUIRE(area <= 1.0);
    const double aspect = double(b.width) / b.height;
    REQUIRE(aspect > 0.74);
    REQUIRE(aspect < 1.35);
  }
  // No square box of at least 90% of a 10x100 image fits: centre crop at the largest ratio.
  const RandomResizedCrop square(8, 8, {0.9, 1.0}, {1.0, 1.0});
  SampleRng rng(0, 0, 0);
  CHECK(square.sample_box(10, 100, rng) == Box{0, 45, 10, 10});
  // Scale and ratio pinned to the whole image: a plain resize.
  const Image image = smooth_image(30, 40, 3);
  const RandomResizedCrop whole(15, 20, {1.0, 1.0}, {4.0 / 3.0, 4.0 / 3.0});
  CHECK(max_abs_diff(whole.apply(image, rng), resample(image, {0, 0, 30, 40}, 15, 20)) == 0);
  CHECK(rrc.decode_min_side() == 792);  // 224 / sqrt(0.08) = 791.96, rounded up
}

TEST_CASE("ColorJitter at known factors") {
  Image px(1, 2, 3);
  px.pixels = {200, 100, 50, 10, 20, 30};
  auto jitter = [&](JitterFactors f) {
    Image copy = px;
    ColorJitter::adjust(copy, f);
    return copy.pixels;
  };
  CHECK(jitter({.brightness = 0.5f}) == std::vector<uint8_t>{100, 50, 25, 5, 10, 15});
  CHECK(jitter({.brightness = 2.0f}) == std::vector<uint8_t>{255, 200, 100, 20, 40, 60});
  // Contrast 0: every channel becomes the mean luma, (124.18 + 18.149) / 2 = 71.16.
  CHECK(jitter({.contrast = 0.0f}) == std::vector<uint8_t>{71, 71, 71, 71, 71, 71});
  // Saturation 0: each pixel becomes its own luma (124.18 and 18.149).
  CHECK(jitter({.saturation = 0.0f}) == std::vector<uint8_t>{124, 124, 124, 18, 18, 18});
  // Saturation 2: 2 v - luma.
  CHECK(jitter({.saturation = 2.0f}) == std::vector<uint8_t>{255, 76, 0, 2, 22, 42});
  // Hue: pure red turned a third of the way round is green, half way is cyan.
  Image red(1, 1, 3);
  red.pixels = {255, 0, 0};
  Image green = red, cyan = red;
  ColorJitter::adjust(green, {.hue = 1.0f / 3.0f});
  ColorJitter::adjust(cyan, {.hue = -0.5f});
  CHECK(green.pixels == std::vector<uint8_t>{0, 255, 0});
  CHECK(cyan.pixels == std::vector<uint8_t>{0, 255, 255});
  // Order matters: brightness 2 (which clips) and saturation 0 do not commute.
  const auto bs = jitter({.brightness = 2.0f, .saturation = 0.0f, .order = {0, 2, 1, 3}});
  const auto sb = jitter({.brightness = 2.0f, .saturation = 0.0f, .order = {2, 0, 1, 3}});
  CHECK(bs[0] == 205);  // luma of (255, 200, 100)
  CHECK(sb[0] == 248);  // 2 * 124
  // Factor ranges.
  const ColorJitter cj(0.4f, 0.4f, 0.4f, 0.1f);
  for (uint64_t s = 0; s < 100; ++s) {
    SampleRng rng(1, 0, s);
    const JitterFactors f = cj.sample_factors(rng);
    REQUIRE(f.brightness >= 0.6f);
    REQUIRE(f.brightness <= 1.4f);
    REQUIRE(std::fabs(f.hue) <= 0.1f);
    std::array<int, 4> sorted = f.order;
    std::sort(sorted.begin(), sorted.end());
    REQUIRE(sorted == std::array<int, 4>{0, 1, 2, 3});
  }
}

TEST_CASE("Normalize writes (x / 255 - mean) / std in f32, f16, bf16, u8 is a copy") {
  Image px(1, 1, 3);
  px.pixels = {255, 0, 51};
  const Normalize n{{0.5f, 0.5f, 0.2f}, {0.25f, 0.5f, 0.1f}};
  const NormalizeParams p = n.params(3);
  float f32[3];
  write_sample(px, p, DType::f32, f32);
  CHECK(f32[0] == doctest::Approx(2.0).epsilon(1e-6));
  CHECK(f32[1] == doctest::Approx(-1.0).epsilon(1e-6));
  CHECK(f32[2] == doctest::Approx(0.0).epsilon(1e-5));
  half f16[3];
  write_sample(px, p, DType::f16, f16);
  CHECK(half_bits_to_float(f16[0].bits) == 2.0f);
  CHECK(half_bits_to_float(f16[1].bits) == -1.0f);
  bfloat16 bf[3];
  write_sample(px, p, DType::bf16, bf);
  CHECK(bf16_bits_to_float(bf[0].bits) == 2.0f);
  uint8_t raw[3];
  write_sample(px, p, DType::u8, raw);
  CHECK(raw[2] == 51);
  CHECK(error_message([] { Normalize{{0.5f}, {0.5f}}.params(3); }).find("1 means and 1 stds for 3 channels") !=
        std::string::npos);
}

TEST_CASE("Pipeline: same (seed, epoch, sample), same bits, the output size is enforced") {
  const Pipeline train = Pipeline::train(32);
  const Image image = smooth_image(60, 80, 3);
  const Image a = train.run(image, 7, 3, 11, "x"), b = train.run(image, 7, 3, 11, "x");
  CHECK(max_abs_diff(a, b) == 0);
  int differing = 0;
  for (uint64_t epoch = 0; epoch < 4; ++epoch) differing += max_abs_diff(train.run(image, 7, epoch, 11, "x"), a) > 0;
  CHECK(differing >= 3);  // epoch 3 is a itself
  const Pipeline eval = Pipeline::eval(40, 32);
  CHECK(eval.run(image, 0, 0, 0, "x").height == 32);
  CHECK(eval.decode_options().min_side == 40);
  const Pipeline wrong({std::make_shared<Resize>(20)}, 32, 32, 3, Normalize::imagenet());
  CHECK(error_message([&] { wrong.run(image, 0, 0, 0, "cat.jpg"); }).find("cat.jpg: the transforms (Resize) produced a "
                                                                          "20x26x3 image") != std::string::npos);
}

TEST_CASE("the batch crop kernel's CPU reference is RandomCrop + RandomHorizontalFlip on its own random stream") {
  const int n = 5, h = 12, w = 10, c = 3;
  std::vector<uint8_t> batch;
  for (int s = 0; s < n; ++s) {
    const Image img = pattern_image(h, w, c, s * 31);
    batch.insert(batch.end(), img.pixels.begin(), img.pixels.end());
  }
  CropFlipParams p;
  p.in_h = h, p.in_w = w, p.channels = c, p.out_h = 8, p.out_w = 8, p.padding = 2;
  p.seed = 42, p.epoch = 3, p.first_sample = 100;
  const Normalize norm = Normalize::imagenet();
  std::vector<float> kernel_out(static_cast<size_t>(n) * 8 * 8 * c);
  kernels::cpu::crop_flip_normalize(batch.data(), n, p, norm.params(c), DType::f32, kernel_out.data());
  const RandomCrop crop(8, 8, 2);
  const RandomHorizontalFlip flip(0.5);
  for (int s = 0; s < n; ++s) {
    // The kernel's draws come from the batch_crop stream, never the one the per-image transforms use.
    SampleRng rng(42, 3, 100 + static_cast<uint64_t>(s), RngPurpose::batch_crop);
    const Image out = flip.apply(crop.apply(pattern_image(h, w, c, s * 31), rng), rng);
    std::vector<float> expected(out.pixels.size());
    write_sample(out, norm.params(c), DType::f32, expected.data());
    CHECK(std::memcmp(expected.data(), kernel_out.data() + s * expected.size(), expected.size() * sizeof(float)) == 0);
  }
}

TEST_CASE("RandomResizedCrop with a flip probability equals RandomResizedCrop then RandomHorizontalFlip, bit for bit") {
  const RandomResizedCrop separate(24, 20, {0.2, 1.0}, {0.75, 4.0 / 3.0});
  const RandomHorizontalFlip flip(0.5);
  const RandomResizedCrop fused(24, 20, {0.2, 1.0}, {0.75, 4.0 / 3.0}, 0.5);
  int mirrored = 0;
  for (uint64_t sample = 0; sample < 40; ++sample) {
    const Image image = pattern_image(37, 53, 3, static_cast<int>(sample));
    SampleRng a(7, 1, sample), b(7, 1, sample), c(7, 1, sample);
    const Image expected = flip.apply(separate.apply(image, a), a);
    const Image got = fused.apply(image, b);
    CHECK(got.pixels == expected.pixels);
    mirrored += separate.apply(image, c).pixels != expected.pixels;
    CHECK(a.uniform() == b.uniform());  // the same draws were consumed
  }
  CHECK(mirrored > 5);  // both branches were exercised
  CHECK(mirrored < 35);
}

// ratio (50, 100) on a 28x28 image: every try fails and the centre-crop fallback rounded its height
// to 0, so the image was reported as unreadable ("empty box 0x16").
TEST_CASE("RandomResizedCrop with extreme ratios falls back to a box of at least one pixel") {
  for (const std::array<double, 2> ratio : {std::array<double, 2>{50, 100}, std::array<double, 2>{0.001, 0.002}}) {
    const RandomResizedCrop rrc(16, 16, {0.08, 1.0}, ratio);
    for (uint64_t i = 0; i < 50; ++i) {
      SampleRng rng(1, 0, i);
      const Image out = rrc.apply(pattern_image(28, 28, 1), rng);
      CHECK(out.height == 16);
      CHECK(out.width == 16);
    }
  }
}
