// Separable antialiased bilinear resampling: per axis a table of taps (first input index and
// normalised weights) for every output index, then two passes.
#include "data/resample.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "engine/error.h"

namespace cnn::data {

namespace {
struct Taps {
  int width = 0;               // taps per output index (padded with zero weights)
  std::vector<int> first;      // first input index of each output index
  std::vector<float> weights;  // [out][width]
};

// Output i covers input [start + i * scale, start + (i + 1) * scale) with scale = size / out; its
// centre is start + (i + 0.5) * scale and the filter radius is max(scale, 1).
Taps make_taps(int in_size, int start, int size, int out) {
  const double scale = static_cast<double>(size) / out;
  const double radius = std::max(scale, 1.0);
  Taps t;
  t.width = static_cast<int>(std::ceil(radius)) * 2 + 1;
  t.first.resize(static_cast<size_t>(out));
  t.weights.assign(static_cast<size_t>(out) * t.width, 0.0f);
  for (int i = 0; i < out; ++i) {
    const double center = start + (i + 0.5) * scale;
    const int lo = std::max(static_cast<int>(std::floor(center - radius)), 0);
    const int hi = std::min(static_cast<int>(std::ceil(center + radius)), in_size);  // exclusive
    double weights[64];
    double total = 0;
    int count = 0;
    for (int j = lo; j < hi && count < t.width; ++j, ++count) {
      const double w = std::max(0.0, 1.0 - std::fabs(j + 0.5 - center) / radius);
      weights[count] = w;
      total += w;
    }
    t.first[static_cast<size_t>(i)] = lo;
    for (int k = 0; k < count; ++k)
      t.weights[static_cast<size_t>(i) * t.width + k] = static_cast<float>(total > 0 ? weights[k] / total : 0.0);
  }
  return t;
}

uint8_t to_byte(float v) { return static_cast<uint8_t>(std::clamp(std::nearbyint(v), 0.0f, 255.0f)); }
}  // namespace

Image resample(const Image& source, const Box& box, int out_h, int out_w) {
  CNN_CHECK(box.height > 0 && box.width > 0 && out_h > 0 && out_w > 0, "resample: empty box ", box.height, "x",
            box.width, " or output ", out_h, "x", out_w);
  CNN_CHECK(box.top >= 0 && box.left >= 0 && box.top + box.height <= source.height &&
                box.left + box.width <= source.width,
            "resample: box ", box.height, "x", box.width, " at (", box.top, ", ", box.left, ") is outside the ",
            source.size_str(), " image");
  CNN_CHECK(std::max(box.height / out_h, box.width / out_w) < 30, "resample: shrinking ", box.height, "x", box.width,
            " to ", out_h, "x", out_w, " is beyond the filter's 30x limit; resize in steps");
  const int c = source.channels;
  const Taps across = make_taps(source.width, box.left, box.width, out_w);
  const Taps down = make_taps(source.height, box.top, box.height, out_h);
  // Rows the vertical pass reads.
  int row_lo = source.height, row_hi = 0;
  for (int i = 0; i < out_h; ++i) {
    row_lo = std::min(row_lo, down.first[static_cast<size_t>(i)]);
    row_hi = std::max(row_hi, std::min(down.first[static_cast<size_t>(i)] + down.width, source.height));
  }
  std::vector<float> rows(static_cast<size_t>(row_hi - row_lo) * out_w * c);
  for (int y = row_lo; y < row_hi; ++y) {
    const uint8_t* src = source.row(y);
    float* dst = rows.data() + static_cast<size_t>(y - row_lo) * out_w * c;
    for (int x = 0; x < out_w; ++x) {
      const int first = across.first[static_cast<size_t>(x)];
      const float* w = &across.weights[static_cast<size_t>(x) * across.width];
      const int taps = std::min(across.width, source.width - first);
      for (int ch = 0; ch < c; ++ch) {
        float sum = 0;
        for (int k = 0; k < taps; ++k) sum += w[k] * src[(first + k) * c + ch];
        dst[x * c + ch] = sum;
      }
    }
  }
  Image out(out_h, out_w, c);
  const size_t row_elems = static_cast<size_t>(out_w) * c;
  std::vector<float> acc(row_elems);
  for (int y = 0; y < out_h; ++y) {
    const int first = down.first[static_cast<size_t>(y)];
    const float* w = &down.weights[static_cast<size_t>(y) * down.width];
    const int taps = std::min(down.width, source.height - first);
    std::fill(acc.begin(), acc.end(), 0.0f);
    for (int k = 0; k < taps; ++k) {
      if (w[k] == 0.0f) continue;
      const float* src = rows.data() + static_cast<size_t>(first + k - row_lo) * row_elems;
      for (size_t i = 0; i < row_elems; ++i) acc[i] += w[k] * src[i];
    }
    uint8_t* dst = out.row(y);
    for (size_t i = 0; i < row_elems; ++i) dst[i] = to_byte(acc[i]);
  }
  return out;
}

}  // namespace cnn::data
