// Pictures of a run as 8-bit RGB images: grids of captioned tiles (the first training batch as the
// model sees it, the most confident validation mistakes) and the confusion matrix as a heat map.
// They become PNGs in the run folder, TensorBoard images and the figures of report.html.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "data/image.h"
#include "data/transforms.h"
#include "engine/tensor.h"

namespace cnn::train {

struct Tile {
  data::Image image;    // 1 or 3 channels
  std::string caption;  // lines separated by '\n'
  std::array<uint8_t, 4> colour = {235, 235, 235, 255};  // of the caption
};

// Tiles in rows of `columns`, each enlarged by a whole factor (nearest neighbour) to at least
// `min_side` pixels on its longer side, its caption under it; RGB on a dark background.
data::Image tile_grid(const std::vector<Tile>& tiles, int columns, int min_side = 64);

// The first `count` images of a normalised NHWC batch (any float dtype, any device) back in 8-bit
// pixels: x * std + mean, times 255, rounded and clamped.
std::vector<data::Image> denormalize(const Tensor& batch, const data::Normalize& normalize, int64_t count);

// The confusion matrix ([truth * classes + predicted] counts) as a heat map: each row normalised by
// its total, a perceptually ordered colour scale (viridis' ends and three stops between) from 0
// (dark purple) to 1 (yellow). Rows are the true class, columns the predicted one; with at most 30
// classes the class numbers are written along both axes.
data::Image confusion_heatmap(const std::vector<int64_t>& confusion, int64_t classes);

// The colour of `fraction` (0..1) on the heat map's scale.
std::array<uint8_t, 3> heat_colour(double fraction);

}  // namespace cnn::train
