// Image encoding to bytes in memory: JPEG with TurboJPEG, PNG/BMP/TGA with stb_image_write. Used to
// build test fixtures and benchmark inputs, and by cnn_pack; decode.h reads all of them back.
#pragma once
#include <cstdint>
#include <vector>

#include "data/image.h"

namespace cnn::data {

enum class ImageFormat { jpeg, png, bmp, tga };

// JPEG takes 1 (gray) or 3 (RGB) channels, or 4 when `cmyk_jpeg` is set (inverted CMYK, as Adobe
// writes it; encoded as YCCK). PNG/BMP/TGA take 1 to 4 channels. `quality` is JPEG's 1..100.
std::vector<uint8_t> encode_image(const Image& image, ImageFormat format, int quality = 90, bool cmyk_jpeg = false);

}  // namespace cnn::data
