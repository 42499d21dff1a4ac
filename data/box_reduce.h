// Box-filter reduction by integer factors, the first step of resampling at ratios beyond what the
// antialiased filter takes in one pass (PIL's Image.reduce, which Image.resize's reducing_gap uses):
// each reduced pixel is the mean of a factor_y x factor_x block of input pixels, in float so that
// the second step starts from unrounded values. Made a row at a time, as the filter asks for them,
// so that no reduced copy of a large image is ever held.
#pragma once
#include "data/image.h"
#include "data/resample.h"

namespace cnn::data {

// `region` of an image cut into blocks of factor_y x factor_x pixels from its top-left corner:
// ceil(height / factor_y) x ceil(width / factor_x) blocks. Blocks cut short by the region's bottom
// or right edge average the pixels they have.
struct BoxReduction {
  Box region;
  int factor_y = 1, factor_x = 1;
  int height() const { return (region.height + factor_y - 1) / factor_y; }
  int width() const { return (region.width + factor_x - 1) / factor_x; }
};

// The means of blocks [first, first + count) of block row `row`: count * channels floats, HWC.
void box_reduce_row(const Image& source, const BoxReduction& reduction, int row, int first, int count, float* dst);

}  // namespace cnn::data
