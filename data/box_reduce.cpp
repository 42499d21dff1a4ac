// Box reduction (see box_reduce.h): for a block row, the column sums of its factor_y source rows in
// 32-bit integers (a loop over bytes the compiler vectorises), then the sums of factor_x columns,
// multiplied by the inverse of the block's pixel count. Every source byte is read once when the
// rows are asked for once each, as the resampling filter does: time linear in the pixels.
#include "data/box_reduce.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "engine/error.h"

namespace cnn::data {

namespace {
constexpr int kMaxChannels = 16;

// The means of blocks of `factor` columns (of `rows` rows each) from a block row's column sums. The
// channel count is a template argument where it is common (C > 0) so that the loops unroll.
template <int C>
void reduce_columns_of(const uint32_t* columns, int width, int channels, int factor, int rows, float* dst) {
  const int c = C > 0 ? C : channels;
  const double full = 1.0 / (static_cast<double>(rows) * factor);  // the blocks cut short divide for themselves
  for (int x0 = 0; x0 < width; x0 += factor, dst += c) {
    const int x1 = std::min(x0 + factor, width);
    int64_t sums[C > 0 ? C : kMaxChannels] = {};  // signed: a single instruction converts it to double
    for (const uint32_t* col = columns + static_cast<size_t>(x0) * c; col < columns + static_cast<size_t>(x1) * c; col += c)
      for (int ch = 0; ch < c; ++ch) sums[ch] += col[ch];
    const double inverse = x1 - x0 == factor ? full : 1.0 / (static_cast<double>(rows) * (x1 - x0));
    for (int ch = 0; ch < c; ++ch) dst[ch] = static_cast<float>(static_cast<double>(sums[ch]) * inverse);
  }
}

void reduce_columns(const uint32_t* columns, int width, int channels, int factor, int rows, float* dst) {
  switch (channels) {
    case 1: return reduce_columns_of<1>(columns, width, channels, factor, rows, dst);
    case 3: return reduce_columns_of<3>(columns, width, channels, factor, rows, dst);
    case 4: return reduce_columns_of<4>(columns, width, channels, factor, rows, dst);
    default: return reduce_columns_of<0>(columns, width, channels, factor, rows, dst);
  }
}
}  // namespace

void box_reduce_row(const Image& source, const BoxReduction& reduction, int row, int first, int count, float* dst) {
  const Box& region = reduction.region;
  const int fy = reduction.factor_y, fx = reduction.factor_x, c = source.channels;
  CNN_CHECK(fy >= 1 && fx >= 1 && fy <= (1 << 24), "box_reduce_row: factors ", fy, "x", fx,
            " must be positive (and the rows' below 2^24, so that a column sum fits 32 bits)");
  CNN_CHECK(c >= 1 && c <= kMaxChannels, "box_reduce_row: ", c, " channels; at most ", kMaxChannels);
  CNN_CHECK(region.height > 0 && region.width > 0 && region.top >= 0 && region.left >= 0 &&
                region.top + region.height <= source.height && region.left + region.width <= source.width,
            "box_reduce_row: region ", region.height, "x", region.width, " at (", region.top, ", ", region.left,
            ") is not inside the ", source.size_str(), " image");
  CNN_CHECK(row >= 0 && row < reduction.height() && first >= 0 && count >= 0 && first + count <= reduction.width(),
            "box_reduce_row: blocks [", first, ", ", first + count, ") of row ", row, " are outside the ",
            reduction.height(), "x", reduction.width(), " reduction");
  if (count == 0) return;
  const int y0 = region.top + row * fy, y1 = std::min(y0 + fy, region.top + region.height);
  const int x0 = first * fx, x1 = std::min((first + count) * fx, region.width);  // relative to region.left
  const size_t values = static_cast<size_t>(x1 - x0) * c;
  thread_local std::vector<uint32_t> columns;  // reused from call to call
  columns.assign(values, 0u);
  for (int y = y0; y < y1; ++y) {
    const uint8_t* src = source.row(y) + static_cast<size_t>(region.left + x0) * c;
    for (size_t j = 0; j < values; ++j) columns[j] += src[j];
  }
  reduce_columns(columns.data(), x1 - x0, c, fx, y1 - y0, dst);
}

}  // namespace cnn::data
