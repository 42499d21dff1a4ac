// Image decoding from encoded bytes in memory: JPEG with TurboJPEG (optionally at a reduced size
// through its DCT scaling), PNG, BMP, GIF (first frame), TGA and PPM/PGM with stb_image. The result
// is converted to the requested number of channels (1: gray, 3: RGB) from grayscale, RGB, RGBA
// (alpha dropped) or CMYK (Adobe's inverted convention, which is what CMYK JPEGs carry in practice).
// Images larger than a pixel limit are refused from their header, before decoding.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "data/image.h"
#include "engine/error.h"

namespace cnn::data {

// Data that cannot be decoded: zero bytes, truncated, or not an image in a supported format. The
// loader skips such samples (or stops, with fail_on_corrupt); every other error stops at once.
class CorruptImageError : public Error {
 public:
  using Error::Error;
};

// The default pixel limit: Pillow's PIL.Image.MAX_IMAGE_PIXELS (src/PIL/Image.py),
// int(1024 * 1024 * 1024 // 4 // 3) = 89,478,485 pixels, a quarter GiB as 8-bit RGB. Pillow warns
// above it (DecompressionBombWarning) and refuses above twice it; we refuse above it.
inline constexpr int64_t kDefaultMaxImagePixels = 1024LL * 1024 * 1024 / 4 / 3;

struct DecodeOptions {
  int channels = 3;  // 1 or 3
  // JPEG only: decode at the smallest DCT scale (1/8 ... 1) whose shorter side is still at least
  // min_side pixels; 0 decodes at full size. Other formats always decode at full size.
  int min_side = 0;
  // An image whose header claims more pixels (width x height) than this is a CorruptImageError,
  // raised before any pixel is decoded or allocated: a file of a few dozen bytes can claim
  // 65000 x 65000 pixels (a decompression bomb). 0: no limit.
  int64_t max_pixels = kDefaultMaxImagePixels;
};

// Decodes `size` bytes; `name` (a file path, or "packed.h5 [12]") goes into error messages.
Image decode_image(const uint8_t* bytes, size_t size, const DecodeOptions& options, const std::string& name);

bool looks_like_jpeg(const uint8_t* bytes, size_t size);

// Converts between 1 (gray), 3 (RGB) and 4 (RGBA) channels; gray from RGB with the ITU-R 601 luma
// weights that ColorJitter also uses.
Image convert_channels(Image image, int channels);

// Luma of an RGB triple (ITU-R 601 weights, as torchvision's rgb_to_grayscale), unrounded.
inline float luma(float r, float g, float b) { return 0.2989f * r + 0.587f * g + 0.114f * b; }

}  // namespace cnn::data
