// Resampling at any ratio: downscales the filter takes in one pass keep their exact bits (pinned
// by checksums), and larger ones (a 2000x2000 photo to 28x28, non-square, 1 x N) come out close
// to the exact antialiased result computed in double precision.
#include <doctest/doctest.h>

#include <cmath>
#include <algorithm>
#include <string>

#include "data/box_reduce.h"
#include "data/resample.h"
#include "fixtures.h"

using namespace cnn;
using namespace cnn::data;
using namespace cnn::data::test;

namespace {
uint64_t fnv1a(const Image& image) {
  uint64_t h = 14695981039346656037ull;
  for (uint8_t v : image.pixels) h = (h ^ v) * 1099511628211ull;
  return h;
}

struct Case {
  int h, w, c;
  Box box;
  int out_h, out_w;
  bool mirror;
  uint64_t checksum;  // of the output of the one-pass filter before larger ratios were supported
};
}  // namespace

TEST_CASE("resample: ratios below 30x give the same bits as the one-pass filter always did") {
  const Case cases[] = {
      {37, 53, 3, {0, 0, 37, 53}, 13, 29, false, 0x9ee66a29cb387564ull},
      {37, 53, 3, {3, 5, 30, 41}, 13, 29, true, 0xca70441afecce6edull},
      {299, 301, 3, {0, 0, 299, 301}, 10, 11, false, 0x5eb556467f4806aaull},        // 29.9x and 27.4x
      {599, 40, 1, {0, 0, 599, 40}, 20, 7, false, 0x97ec2139d05bba69ull},           // 29.95x, one channel
      {2000, 2000, 3, {0, 0, 2000, 2000}, 69, 69, false, 0x65c61c790fa688a5ull},    // 28.99x, just inside the old limit
      {2000, 1500, 3, {100, 200, 1700, 1200}, 224, 224, true, 0x70dcd39b222c060cull},
      {64, 96, 4, {0, 0, 64, 96}, 5, 7, false, 0xbb98f890e5de3fa9ull},              // four channels
      {64, 96, 5, {1, 2, 60, 90}, 5, 7, true, 0xd9faac3d1e38cb8full},               // more than four: the per-channel path
      {20, 30, 3, {0, 0, 20, 30}, 57, 91, false, 0x364e135967faba28ull},            // enlarging
      {1, 900, 3, {0, 0, 1, 900}, 1, 31, false, 0x4591b2fbf96bd9f5ull},             // one row
      {900, 1, 1, {0, 0, 900, 1}, 31, 1, false, 0x7d18fe8ab7a90a19ull},             // one column
  };
  for (const Case& k : cases) {
    const Image source = noise_image(k.h, k.w, k.c, static_cast<uint32_t>(k.h * 31 + k.w));
    const uint64_t got = fnv1a(resample(source, k.box, k.out_h, k.out_w, k.mirror));
    INFO(k.h, "x", k.w, "x", k.c, " box ", k.box.top, ",", k.box.left, ",", k.box.height, ",", k.box.width, " to ", k.out_h,
         "x", k.out_w, std::string(k.mirror ? " mirrored" : ""));
    CHECK(got == k.checksum);
  }
}

namespace {
// resample.h's filter computed directly in double precision, in one pass at any ratio: per output
// index the normalised triangle weights over its inputs, horizontally then vertically, rounded
// half to even at the end.
struct AxisWeights {
  std::vector<int> first;
  std::vector<std::vector<double>> weights;
};
AxisWeights exact_weights(int in_size, int start, int size, int out) {
  const double scale = static_cast<double>(size) / out, radius = std::max(scale, 1.0);
  AxisWeights a;
  for (int i = 0; i < out; ++i) {
    const double center = start + (i + 0.5) * scale;
    const int lo = std::max(static_cast<int>(std::floor(center - radius)), 0);
    const int hi = std::min(static_cast<int>(std::ceil(center + radius)), in_size);
    std::vector<double> w;
    double total = 0;
    for (int j = lo; j < hi; ++j) total += w.emplace_back(std::max(0.0, 1.0 - std::fabs(j + 0.5 - center) / radius));
    for (double& v : w) v /= total;
    a.first.push_back(lo);
    a.weights.push_back(std::move(w));
  }
  return a;
}

std::vector<double> exact_values(const Image& source, const Box& box, int out_h, int out_w, bool mirror = false) {
  const AxisWeights across = exact_weights(source.width, box.left, box.width, out_w);
  const AxisWeights down = exact_weights(source.height, box.top, box.height, out_h);
  const int c = source.channels;
  std::vector<double> out(static_cast<size_t>(out_h) * out_w * c);
  std::vector<double> row(static_cast<size_t>(out_w) * c);
  std::vector<double> sum(static_cast<size_t>(out_w) * c);
  for (int y = 0; y < out_h; ++y) {
    std::fill(sum.begin(), sum.end(), 0.0);
    for (size_t k = 0; k < down.weights[static_cast<size_t>(y)].size(); ++k) {
      const int r = down.first[static_cast<size_t>(y)] + static_cast<int>(k);
      std::fill(row.begin(), row.end(), 0.0);
      for (int x = 0; x < out_w; ++x)
        for (size_t t = 0; t < across.weights[static_cast<size_t>(x)].size(); ++t)
          for (int ch = 0; ch < c; ++ch)
            row[static_cast<size_t>(x) * c + ch] +=
                across.weights[static_cast<size_t>(x)][t] * source.at(r, across.first[static_cast<size_t>(x)] + static_cast<int>(t), ch);
      for (size_t i = 0; i < sum.size(); ++i) sum[i] += down.weights[static_cast<size_t>(y)][k] * row[i];
    }
    for (int x = 0; x < out_w; ++x)
      for (int ch = 0; ch < c; ++ch)
        out[(static_cast<size_t>(y) * out_w + (mirror ? out_w - 1 - x : x)) * c + ch] = sum[static_cast<size_t>(x) * c + ch];
  }
  return out;
}

// How far resample() is from the exact result: the largest difference from the exact (unrounded)
// value, the largest difference from it rounded, and the share of values that differ from that.
struct Deviation {
  double from_value = 0;
  int worst = 0;
  double share_off = 0;
};
Deviation deviation(const Image& source, const Box& box, int out_h, int out_w, bool mirror = false) {
  const Image got = resample(source, box, out_h, out_w, mirror);
  const std::vector<double> want = exact_values(source, box, out_h, out_w, mirror);
  REQUIRE(got.height == out_h);
  REQUIRE(got.width == out_w);
  Deviation d;
  int64_t off = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const int rounded = static_cast<int>(std::clamp(std::nearbyint(want[i]), 0.0, 255.0));
    d.from_value = std::max(d.from_value, std::fabs(got.pixels[i] - want[i]));
    d.worst = std::max(d.worst, std::abs(got.pixels[i] - rounded));
    off += got.pixels[i] != rounded;
  }
  d.share_off = static_cast<double>(off) / static_cast<double>(want.size());
  return d;
}
}  // namespace

TEST_CASE("resample: beyond 30x it stays within 0.75 of the exact antialiased value") {
  // The one-pass filter (below 30x) is within 0.5 of the exact value plus float rounding: what
  // rounding to bytes allows. Beyond, each axis is box-reduced by the smallest integer factor that
  // brings it below 30x, and the filter runs on the means; the combined weights differ from the
  // exact triangle only in the blocks that hold its apex and ends. On noise (the worst case, all
  // energy at high frequencies) that added at most 0.2 in every case measured, the most just past
  // 30x (2000 -> 66: factor 2, the coarsest remaining filter). Hence 0.75: never more than 1 from
  // the exact value rounded, and that on a few percent of the values.
  struct Large {
    int h, w, c;
    Box box;
    int out_h, out_w;
    bool mirror;
  };
  const Large cases[] = {
      {2000, 2000, 3, {0, 0, 2000, 2000}, 28, 28, false},      // 71x: a photo to Fashion-MNIST's size
      {2000, 2000, 3, {0, 0, 2000, 2000}, 66, 66, false},      // 30.3x, just past one pass
      {1950, 1300, 3, {0, 0, 1950, 1300}, 30, 20, false},      // 65x on both axes
      {3000, 200, 3, {0, 0, 3000, 200}, 28, 28, false},        // 107x down, 7x across: one axis reduced
      {2000, 1500, 3, {500, 300, 1200, 1100}, 20, 17, true},   // a crop inside the image, mirrored
      {1000, 1000, 1, {0, 0, 1000, 1000}, 33, 33, false},      // 30.3x, one channel
      {1000, 1000, 4, {0, 0, 1000, 1000}, 1, 1, false},        // to a single pixel
      {300, 400, 5, {0, 0, 300, 400}, 4, 6, false},            // more than four channels
      {1, 5000, 3, {0, 0, 1, 5000}, 1, 3, false},              // 1 x N
      {1, 100000, 1, {0, 0, 1, 100000}, 1, 1, false},
      {4000, 1, 1, {0, 0, 4000, 1}, 7, 1, false},              // N x 1
  };
  for (const Large& k : cases)
    for (const bool noise : {true, false}) {
      const Image source = noise ? noise_image(k.h, k.w, k.c, 7) : smooth_image(k.h, k.w, k.c, 3);
      const Deviation d = deviation(source, k.box, k.out_h, k.out_w, k.mirror);
      INFO(k.box.height, "x", k.box.width, " to ", k.out_h, "x", k.out_w, std::string(noise ? " noise" : " smooth"));
      CHECK(d.from_value <= 0.75);
      CHECK(d.worst <= 1);
      CHECK(d.share_off <= 0.12);
    }
  // A constant stays exactly constant; the mirrored result is the flipped one, bit for bit.
  CHECK(max_abs_diff(resample(constant_image(2000, 1800, 3, 77), {0, 0, 2000, 1800}, 28, 28), constant_image(28, 28, 3, 77)) == 0);
  const Image photo = noise_image(2100, 1900, 3, 5);
  const Image straight = resample(photo, {10, 20, 2000, 1800}, 28, 25), mirrored = resample(photo, {10, 20, 2000, 1800}, 28, 25, true);
  int mismatches = 0;
  for (int y = 0; y < 28; ++y)
    for (int x = 0; x < 25; ++x)
      for (int c = 0; c < 3; ++c) mismatches += straight.at(y, x, c) != mirrored.at(y, 24 - x, c);
  CHECK(mismatches == 0);
}

TEST_CASE("box_reduce_row: block means, blocks cut short by the region's edge, any range of blocks") {
  // A 3 x 5 region of one channel, values 10 y + x, in blocks of 2 x 2 from (1, 1) of a 4 x 6 image.
  Image image(4, 6, 1);
  for (int y = 0; y < 4; ++y)
    for (int x = 0; x < 6; ++x) image.at(y, x, 0) = static_cast<uint8_t>(10 * y + x);
  const BoxReduction r{{1, 1, 3, 5}, 2, 2};
  REQUIRE(r.height() == 2);
  REQUIRE(r.width() == 3);
  float row[3];
  box_reduce_row(image, r, 0, 0, 3, row);
  CHECK(row[0] == doctest::Approx(16.5));  // (11 + 12 + 21 + 22) / 4
  CHECK(row[1] == doctest::Approx(18.5));
  CHECK(row[2] == doctest::Approx(20.0));  // (15 + 25) / 2: the block cut short by the right edge
  box_reduce_row(image, r, 1, 1, 2, row);  // the bottom band is one row high
  CHECK(row[0] == doctest::Approx(33.5));  // (33 + 34) / 2
  CHECK(row[1] == doctest::Approx(35.0));
  CHECK(error_message([&] { box_reduce_row(image, r, 2, 0, 1, row); }).find("outside the 2x3 reduction") != std::string::npos);
}
