// Bilinear resampling with antialiasing, the way PIL and torchvision (antialias=True) do it: each
// output pixel is a weighted mean of the input pixels under a triangle filter centred on it, whose
// radius is one output pixel measured in input pixels when shrinking (so every input pixel
// contributes, no aliasing) and one input pixel when enlarging (plain bilinear interpolation).
// Separable: a horizontal pass in float over the source rows the vertical pass needs (each one
// once), then a vertical pass in float rounding to 8 bits (half to even). Each value is the plain
// sum of weight * input over its taps in input order, so the bits do not depend on how the loops
// are vectorised (resample.cpp says how they are made fast). Any ratio: an axis shrunk 30x or more
// is box-reduced first (box_reduce.h), which keeps the result within 0.75 of the exact value.
#pragma once
#include "data/image.h"

namespace cnn::data {

// A rectangle of the source image in pixels: rows [top, top + height), columns [left, left + width).
struct Box {
  int top = 0, left = 0, height = 0, width = 0;
  bool operator==(const Box&) const = default;
};

// Resamples `box` of `source` to out_h x out_w. Filter taps may reach outside the box (into the
// rest of the image) but never outside the image, as with PIL's resize(box=...). mirror: the result
// flipped left to right, bit for bit the same as flipping afterwards, at no extra cost.
Image resample(const Image& source, const Box& box, int out_h, int out_w, bool mirror = false);

}  // namespace cnn::data
