// Tile grids, de-normalisation and the confusion heat map (see image_grid.h).
#include "train/pictures/image_grid.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "engine/error.h"
#include "train/pictures/bitmap_font.h"

namespace cnn::train {

namespace {

constexpr uint8_t kBackground = 30;
constexpr int kGap = 4;  // pixels between tiles and around the grid

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// Copies `tile` enlarged by `scale` into `out` at (x, y), grey as RGB.
void paste(data::Image& out, const data::Image& tile, int x, int y, int scale) {
  for (int ty = 0; ty < tile.height * scale; ++ty)
    for (int tx = 0; tx < tile.width * scale; ++tx)
      for (int c = 0; c < 3; ++c)
        out.at(y + ty, x + tx, c) = tile.at(ty / scale, tx / scale, tile.channels == 1 ? 0 : std::min(c, tile.channels - 1));
}

}  // namespace

data::Image tile_grid(const std::vector<Tile>& tiles, int columns, int min_side) {
  CNN_CHECK(!tiles.empty() && columns > 0, "tile_grid: no tiles, or no columns");
  int tile_h = 0, tile_w = 0;
  size_t caption_lines = 0;
  for (const Tile& t : tiles) {
    tile_h = std::max(tile_h, t.image.height);
    tile_w = std::max(tile_w, t.image.width);
    caption_lines = std::max(caption_lines, lines_of(t.caption).size());
  }
  const int scale = std::max(1, (min_side + std::max(tile_h, tile_w) - 1) / std::max(1, std::max(tile_h, tile_w)));
  const int cell_w = std::max(tile_w * scale, 8 * kCellWidth);
  const int cell_h = tile_h * scale + static_cast<int>(caption_lines) * kCellHeight + (caption_lines ? 2 : 0);
  const int cols = std::min<int>(columns, static_cast<int>(tiles.size()));
  const int rows = (static_cast<int>(tiles.size()) + cols - 1) / cols;
  data::Image out(kGap + rows * (cell_h + kGap), kGap + cols * (cell_w + kGap), 3);
  std::fill(out.pixels.begin(), out.pixels.end(), kBackground);
  for (size_t i = 0; i < tiles.size(); ++i) {
    const int x = kGap + static_cast<int>(i) % cols * (cell_w + kGap), y = kGap + static_cast<int>(i) / cols * (cell_h + kGap);
    const Tile& t = tiles[i];
    paste(out, t.image, x, y, scale);
    int line_y = y + t.image.height * scale + 2;
    for (const std::string& line : lines_of(t.caption)) {
      draw_text(out, x, line_y, fit_text(line, cell_w), t.colour);
      line_y += kCellHeight;
    }
  }
  return out;
}

std::vector<data::Image> denormalize(const Tensor& batch, const data::Normalize& normalize, int64_t count) {
  CNN_CHECK(batch.dim() == 4, "denormalize: expects an NHWC batch, got ", batch.shape().str());
  const int64_t n = std::min(count, batch.size(0)), h = batch.size(1), w = batch.size(2), c = batch.size(3);
  const std::vector<double> values = batch.to_doubles();
  std::vector<data::Image> images;
  for (int64_t i = 0; i < n; ++i) {
    data::Image image(static_cast<int>(h), static_cast<int>(w), static_cast<int>(c));
    for (int64_t p = 0; p < h * w; ++p)
      for (int64_t ch = 0; ch < c; ++ch) {
        const auto k = static_cast<size_t>(ch);
        const double mean = k < normalize.mean.size() ? normalize.mean[k] : 0.0;
        const double std = k < normalize.std.size() ? normalize.std[k] : 1.0;
        const double x = values[static_cast<size_t>((i * h * w + p) * c + ch)] * std + mean;
        image.pixels[static_cast<size_t>(p * c + ch)] = static_cast<uint8_t>(std::clamp(std::lround(x * 255.0), 0L, 255L));
      }
    images.push_back(std::move(image));
  }
  return images;
}

std::array<uint8_t, 3> heat_colour(double fraction) {
  // viridis at 0, 0.25, 0.5, 0.75 and 1, linearly between.
  static const double stops[5][3] = {{68, 1, 84}, {59, 82, 139}, {33, 145, 140}, {94, 201, 98}, {253, 231, 37}};
  const double f = std::clamp(std::isfinite(fraction) ? fraction : 0.0, 0.0, 1.0) * 4.0;
  const int i = std::min(3, static_cast<int>(f));
  const double t = f - i;
  std::array<uint8_t, 3> rgb{};
  for (int c = 0; c < 3; ++c) rgb[static_cast<size_t>(c)] = static_cast<uint8_t>(std::lround(stops[i][c] + t * (stops[i + 1][c] - stops[i][c])));
  return rgb;
}

data::Image confusion_heatmap(const std::vector<int64_t>& confusion, int64_t classes) {
  CNN_CHECK(classes > 0 && confusion.size() == static_cast<size_t>(classes * classes), "confusion_heatmap: ", confusion.size(),
            " counts for ", classes, " classes");
  const int cell = static_cast<int>(std::clamp<int64_t>(480 / classes, 1, 32));
  const bool numbered = classes <= 30;
  const int margin = numbered ? 3 * kCellWidth + 2 : 0;
  const int side = static_cast<int>(classes) * cell;
  data::Image out(margin + side, margin + side, 3);
  std::fill(out.pixels.begin(), out.pixels.end(), kBackground);
  for (int64_t truth = 0; truth < classes; ++truth) {
    int64_t total = 0;
    for (int64_t p = 0; p < classes; ++p) total += confusion[static_cast<size_t>(truth * classes + p)];
    for (int64_t p = 0; p < classes; ++p) {
      const double fraction = total ? static_cast<double>(confusion[static_cast<size_t>(truth * classes + p)]) / total : 0.0;
      const std::array<uint8_t, 3> rgb = heat_colour(fraction);
      for (int y = 0; y < cell; ++y)
        for (int x = 0; x < cell; ++x)
          for (int c = 0; c < 3; ++c)
            out.at(margin + static_cast<int>(truth) * cell + y, margin + static_cast<int>(p) * cell + x, c) = rgb[static_cast<size_t>(c)];
    }
  }
  if (numbered)
    for (int64_t k = 0; k < classes; ++k) {
      const std::string label = std::to_string(k);
      const int along = margin + static_cast<int>(k) * cell + (cell - text_width(label)) / 2;
      draw_text(out, 1, margin + static_cast<int>(k) * cell + (cell - kGlyphHeight) / 2, label, {200, 200, 200, 255});
      draw_text(out, along, 1, label, {200, 200, 200, 255});
    }
  return out;
}

}  // namespace cnn::train
