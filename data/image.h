// A decoded image: 8-bit samples in HWC order (row-major, channels interleaved), the form every
// dataset yields and every CPU transform works on.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace cnn::data {

struct Image {
  int height = 0;
  int width = 0;
  int channels = 0;
  std::vector<uint8_t> pixels;  // height * width * channels bytes

  Image() = default;
  Image(int h, int w, int c) : height(h), width(w), channels(c), pixels(static_cast<size_t>(h) * w * c) {}

  uint8_t* row(int y) { return pixels.data() + static_cast<size_t>(y) * width * channels; }
  const uint8_t* row(int y) const { return pixels.data() + static_cast<size_t>(y) * width * channels; }
  uint8_t& at(int y, int x, int c) { return row(y)[static_cast<size_t>(x) * channels + c]; }
  uint8_t at(int y, int x, int c) const { return row(y)[static_cast<size_t>(x) * channels + c]; }
  bool empty() const { return pixels.empty(); }
  std::string size_str() const {  // "375x500x3" (height x width x channels)
    return std::to_string(height) + "x" + std::to_string(width) + "x" + std::to_string(channels);
  }
};

}  // namespace cnn::data
