// Text drawn into 8-bit images: the captions of the sample and mistake grids (class names, scores).
// A 5x7-pixel font of capitals, digits and common punctuation on a 6x9 cell; lower-case letters are
// drawn as capitals and characters without a glyph as '?'. Enough for labels under 28x28 tiles.
#pragma once
#include <array>
#include <string>

#include "data/image.h"

namespace cnn::train {

constexpr int kGlyphWidth = 5, kGlyphHeight = 7;
constexpr int kCellWidth = kGlyphWidth + 1, kCellHeight = kGlyphHeight + 2;  // with spacing

// Draws `text` with its top-left corner at (x, y) in `colour` (one value per channel, the image's
// channel count at most 4), clipped to the image. Returns the x after the last character.
int draw_text(data::Image& image, int x, int y, const std::string& text, const std::array<uint8_t, 4>& colour);

// Pixels wide that `text` takes; the longest prefix of `text` that fits in `width` pixels.
int text_width(const std::string& text);
std::string fit_text(const std::string& text, int width);

}  // namespace cnn::train
