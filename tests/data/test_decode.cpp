// Decoding: every supported format, channel conversions (gray, RGBA, CMYK), JPEG DCT scaling, and
// the corrupt inputs that must raise CorruptImageError rather than crash or stop.
#include <doctest/doctest.h>

#include <filesystem>

#include "data/decode.h"
#include "data/encode.h"
#include "data/file_dataset.h"
#include "fixtures.h"

using namespace cnn;
using namespace cnn::data;
using namespace cnn::data::test;

namespace {
Image decode(const std::vector<uint8_t>& bytes, int channels, int min_side = 0) {
  return decode_image(bytes.data(), bytes.size(), {.channels = channels, .min_side = min_side}, "fixture");
}

std::string corrupt_message(const std::vector<uint8_t>& bytes) {
  try {
    decode(bytes, 3);
  } catch (const CorruptImageError& e) {
    return e.what();
  }
  return "(decoded)";
}
}  // namespace

TEST_CASE("lossless formats decode to the exact pixels") {
  const Image rgb = pattern_image(7, 9, 3, 5);
  for (ImageFormat f : {ImageFormat::png, ImageFormat::bmp, ImageFormat::tga}) {
    const Image back = decode(encode_image(rgb, f), 3);
    CHECK(max_abs_diff(back, rgb) == 0);
  }
}

TEST_CASE("channel conversions: gray to RGB, RGBA drops alpha, RGB to gray by luma") {
  const Image gray = pattern_image(5, 6, 1, 3);
  const Image as_rgb = decode(encode_image(gray, ImageFormat::png), 3);
  CHECK(as_rgb.channels == 3);
  CHECK(as_rgb.at(2, 3, 0) == gray.at(2, 3, 0));
  CHECK(as_rgb.at(2, 3, 2) == gray.at(2, 3, 0));

  Image rgba = pattern_image(5, 6, 4, 9);
  const Image no_alpha = decode(encode_image(rgba, ImageFormat::png), 3);
  CHECK(no_alpha.at(4, 5, 1) == rgba.at(4, 5, 1));

  Image one(1, 1, 3);
  one.pixels = {200, 100, 50};
  const Image g = convert_channels(one, 1);
  CHECK(g.pixels[0] == static_cast<uint8_t>(0.2989 * 200 + 0.587 * 100 + 0.114 * 50 + 0.5));  // 124
}

TEST_CASE("JPEG: RGB, grayscale and CMYK files; RGB to gray in the decoder") {
  const Image rgb = smooth_image(32, 48, 3);
  const auto jpeg = encode_image(rgb, ImageFormat::jpeg, 95);
  const Image back = decode(jpeg, 3);
  CHECK(back.height == 32);
  CHECK(back.width == 48);
  CHECK(max_abs_diff(back, rgb) <= 8);
  const Image gray = decode(jpeg, 1);
  CHECK(gray.channels == 1);
  CHECK(std::abs(int(gray.at(10, 10, 0)) - int(convert_channels(rgb, 1).at(10, 10, 0))) <= 8);

  const Image g = smooth_image(16, 16, 1);
  CHECK(max_abs_diff(decode(encode_image(g, ImageFormat::jpeg, 95), 1), g) <= 4);
  CHECK(decode(encode_image(g, ImageFormat::jpeg, 95), 3).channels == 3);

  // Inverted CMYK: C = M = Y = 255 - 55 (little ink) and K = 200 gives R = G = B = 200 * 200 / 255.
  Image cmyk(16, 16, 4);
  for (size_t i = 0; i < cmyk.pixels.size(); i += 4) {
    cmyk.pixels[i] = cmyk.pixels[i + 1] = cmyk.pixels[i + 2] = 200;
    cmyk.pixels[i + 3] = 200;
  }
  const Image from_cmyk = decode(encode_image(cmyk, ImageFormat::jpeg, 100, /*cmyk_jpeg=*/true), 3);
  CHECK(from_cmyk.channels == 3);
  CHECK(std::abs(int(from_cmyk.at(8, 8, 0)) - 157) <= 3);
  CHECK(std::abs(int(from_cmyk.at(8, 8, 2)) - 157) <= 3);
}

TEST_CASE("JPEG DCT scaling decodes at the smallest scale still at least min_side") {
  const auto jpeg = encode_image(smooth_image(375, 500, 3), ImageFormat::jpeg, 90);
  const Image full = decode(jpeg, 3, 0);
  CHECK(full.height == 375);
  const Image half = decode(jpeg, 3, 180);  // 3/8 gives 141 < 180; 1/2 gives 188
  CHECK(half.height == 188);
  CHECK(half.width == 250);
  const Image exact = decode(jpeg, 3, 375);
  CHECK(exact.height == 375);
  const Image eighth = decode(jpeg, 3, 10);
  CHECK(eighth.height == 47);
}

TEST_CASE("corrupt inputs raise CorruptImageError with the reason") {
  const auto jpeg = encode_image(smooth_image(256, 256, 3), ImageFormat::jpeg, 90);
  const auto png = encode_image(pattern_image(64, 64, 3), ImageFormat::png);
  CHECK(corrupt_message({}).find("empty file") != std::string::npos);
  CHECK(corrupt_message(std::vector<uint8_t>(jpeg.begin(), jpeg.begin() + jpeg.size() * 3 / 4)).find("truncated") !=
        std::string::npos);
  CHECK(corrupt_message(std::vector<uint8_t>(jpeg.begin(), jpeg.begin() + 20)).find("JPEG") != std::string::npos);
  CHECK(corrupt_message(std::vector<uint8_t>(png.begin(), png.begin() + png.size() / 2)).find("not a readable image") !=
        std::string::npos);
  const std::string text = "just some text, certainly not an image";
  CHECK(corrupt_message(std::vector<uint8_t>(text.begin(), text.end())).find("fixture") == 0);
}

TEST_CASE("unreadable files: missing, a folder, zero bytes") {
  TempDir dir;
  CHECK_THROWS_AS(read_file_bytes((dir.path() / "missing.jpg").string()), CorruptImageError);
  std::filesystem::create_directories(dir.path() / "folder.jpg");
  CHECK_THROWS_AS(read_file_bytes((dir.path() / "folder.jpg").string()), CorruptImageError);
  const std::string empty = dir.write("zero.png", {});
  CHECK(read_file_bytes(empty).empty());
}
