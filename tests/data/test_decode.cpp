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

TEST_CASE("JPEG: RGB, grayscale and CMYK files, RGB to gray in the decoder") {
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
  // stb_image decodes a BMP whose header says height 0 to no pixels at all.
  std::vector<uint8_t> flat = encode_image(pattern_image(2, 3, 3), ImageFormat::bmp);
  std::fill(flat.begin() + 22, flat.begin() + 26, uint8_t{0});  // BITMAPINFOHEADER biHeight
  CHECK(corrupt_message(flat).find("the image is empty (3 x 0 pixels)") != std::string::npos);
}

namespace {
// A baseline JPEG (SOI, SOF0 of one 8-bit component, SOS) whose frame claims width x height, with
// a few bytes of scan data and EOI.
std::vector<uint8_t> jpeg_header_claiming(uint16_t width, uint16_t height) {
  return {0xFF, 0xD8,                                                      // SOI
          0xFF, 0xC0, 0x00, 0x0B, 0x08,                                    // SOF0, length 11, 8 bits
          static_cast<uint8_t>(height >> 8), static_cast<uint8_t>(height),  //
          static_cast<uint8_t>(width >> 8), static_cast<uint8_t>(width),    //
          0x01, 0x01, 0x11, 0x00,                                          // 1 component: id 1, 1x1, table 0
          0xFF, 0xDA, 0x00, 0x08, 0x01, 0x01, 0x00, 0x00, 0x3F, 0x00,      // SOS
          0x00, 0x00, 0x00, 0x00,                                          // scan data
          0xFF, 0xD9};                                                     // EOI
}
}  // namespace

TEST_CASE("decompression bombs: a header claiming more pixels than the limit is corrupt, before any decoding") {
  // 65000 x 65000 RGB would be 12.7 GB; 10000 x 10000 (100 M pixels) is just over the default.
  const std::string png = corrupt_message(png_header_claiming(65000, 65000));
  CHECK(png.find("fixture: the header claims 65000 x 65000 pixels") == 0);
  CHECK(png.find("more than the limit of 89478485") != std::string::npos);
  CHECK(corrupt_message(png_header_claiming(0xFFFFFFFF, 0xFFFFFFFF)).find("(18446744065119617025), more than the limit") !=
        std::string::npos);
  const std::string jpeg = corrupt_message(jpeg_header_claiming(10000, 10000));
  CHECK(jpeg.find("fixture: the header claims 10000 x 10000 pixels") == 0);
  CHECK(jpeg.find("more than the limit of 89478485") != std::string::npos);
  CHECK(jpeg.find("[data] max_image_pixels") != std::string::npos);
  CHECK(kDefaultMaxImagePixels == 89478485);

  // The limit counts width x height as the header says it, for every format; 0 lifts it.
  const Image small = smooth_image(12, 10, 3);
  for (ImageFormat f : {ImageFormat::jpeg, ImageFormat::png, ImageFormat::bmp, ImageFormat::tga}) {
    const std::vector<uint8_t> bytes = encode_image(small, f);
    CHECK(decode_image(bytes.data(), bytes.size(), {.max_pixels = 120}, "fixture").height == 12);
    CHECK_THROWS_WITH_AS(decode_image(bytes.data(), bytes.size(), {.max_pixels = 119}, "fixture"),
                         doctest::Contains("claims 10 x 12 pixels (120), more than the limit of 119"), CorruptImageError);
    CHECK(decode_image(bytes.data(), bytes.size(), {.max_pixels = 0}, "fixture").width == 10);
  }
  // Without a limit the claim is believed, and the missing data makes the file corrupt.
  const auto unlimited = png_header_claiming(65000, 65000);
  CHECK_THROWS_AS(decode_image(unlimited.data(), unlimited.size(), {.max_pixels = 0}, "fixture"), CorruptImageError);
  CHECK_THROWS_WITH_AS(decode_image(unlimited.data(), unlimited.size(), {.max_pixels = -1}, "fixture"),
                       doctest::Contains("max_pixels must be 0 (no limit) or positive, not -1"), Error);
}

TEST_CASE("a PNG chunk claiming more bytes than the file holds is corrupt, before stb_image allocates it") {
  // 1.1 GB claimed by a 67-byte file: stb_image would allocate all of it before finding it missing.
  std::vector<uint8_t> claiming = png_header_claiming(5, 3);
  const std::vector<uint8_t> idat = {0x44, 0x52, 0x00, 0x16, 'I', 'D', 'A', 'T', 0x78, 0x5e};
  claiming.insert(claiming.end() - 12, idat.begin(), idat.end());  // before IEND
  CHECK(corrupt_message(claiming).find("PNG chunk 'IDAT' claims 1146224662 bytes, more than the") != std::string::npos);
  // Whole chunks pass the check (and this header-only file fails later, in stb_image).
  CHECK(corrupt_message(png_header_claiming(5, 3)).find("not a readable image") != std::string::npos);
}

TEST_CASE("unreadable files: missing, a folder, zero bytes") {
  TempDir dir;
  CHECK_THROWS_AS(read_file_bytes((dir.path() / "missing.jpg").string()), CorruptImageError);
  std::filesystem::create_directories(dir.path() / "folder.jpg");
  CHECK_THROWS_AS(read_file_bytes((dir.path() / "folder.jpg").string()), CorruptImageError);
  const std::string empty = dir.write("zero.png", {});
  CHECK(read_file_bytes(empty).empty());
}

// A PNG cut after a whole chunk was reported as "not a readable image ()": stb_image gives no reason.
TEST_CASE("a PNG cut after a whole chunk says it ends before IEND, never an empty reason") {
  const std::vector<uint8_t> png = encode_image(smooth_image(16, 16, 3), ImageFormat::png);
  const std::vector<uint8_t> without_end(png.begin(), png.end() - 12);  // the IEND chunk removed
  const std::string message = corrupt_message(without_end);
  CHECK(message.find("the PNG ends before its IEND chunk") != std::string::npos);
  CHECK(message.find("()") == std::string::npos);
}
