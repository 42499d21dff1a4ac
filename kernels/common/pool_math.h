// Window arithmetic of the pooling kernels, shared by CPU and CUDA.
#pragma once
#include <cstdint>

#include "kernels/common/half.h"
#include "kernels/common/host_device.h"
#include "kernels/pool.h"

namespace cnn {

struct PoolWindow {
  int64_t h0, h1, w0, w1;  // clipped to the image: [h0, h1) x [w0, w1)
  int64_t divisor;         // element count for average pooling
};

CNN_HD int64_t adaptive_start(int64_t i, int64_t in, int64_t out) { return (i * in) / out; }
CNN_HD int64_t adaptive_end(int64_t i, int64_t in, int64_t out) { return ((i + 1) * in + out - 1) / out; }

CNN_HD PoolWindow pool_window(const kernels::PoolGeometry& g, int64_t oh, int64_t ow) {
  PoolWindow win;
  if (g.adaptive) {
    win.h0 = adaptive_start(oh, g.h, g.oh);
    win.h1 = adaptive_end(oh, g.h, g.oh);
    win.w0 = adaptive_start(ow, g.w, g.ow);
    win.w1 = adaptive_end(ow, g.w, g.ow);
    win.divisor = (win.h1 - win.h0) * (win.w1 - win.w0);
    return win;
  }
  int64_t h0 = oh * g.stride_h - g.pad_h, w0 = ow * g.stride_w - g.pad_w;
  int64_t h1 = h0 + g.kh, w1 = w0 + g.kw;
  if (h1 > g.h + g.pad_h) h1 = g.h + g.pad_h;
  if (w1 > g.w + g.pad_w) w1 = g.w + g.pad_w;
  const int64_t padded_count = (h1 - h0) * (w1 - w0);  // PyTorch's count_include_pad divisor
  win.h0 = h0 < 0 ? 0 : h0;
  win.w0 = w0 < 0 ? 0 : w0;
  win.h1 = h1 > g.h ? g.h : h1;
  win.w1 = w1 > g.w ? g.w : w1;
  win.divisor = g.count_include_pad ? padded_count : (win.h1 - win.h0) * (win.w1 - win.w0);
  return win;
}

// Average pooling of channel c of image n of x [N, H, W, C] over `win`: the window's sum, in
// row-major order, divided by its divisor.
template <class T>
CNN_HD compute_t<T> pool_window_mean(const kernels::PoolGeometry& g, const PoolWindow& win, const T* x, int64_t n,
                                     int64_t c) {
  using C = compute_t<T>;
  C acc = 0;
  for (int64_t iy = win.h0; iy < win.h1; ++iy)
    for (int64_t ix = win.w0; ix < win.w1; ++ix) acc += to_compute(x[((n * g.h + iy) * g.w + ix) * g.c + c]);
  return acc / static_cast<C>(win.divisor);
}

// Whether input pixel (iy, ix) lies in the (clipped) window `win`.
CNN_HD bool pool_window_contains(const PoolWindow& win, int64_t iy, int64_t ix) {
  return iy >= win.h0 && iy < win.h1 && ix >= win.w0 && ix < win.w1;
}

// A range of output rows (or columns) that contains every window covering input index i along one
// axis; callers still check membership with pool_window_contains.
CNN_HD void pool_outputs_covering_axis(int64_t i, int64_t in, int64_t out, int kernel, int stride, int pad,
                                       bool adaptive, int64_t& lo, int64_t& hi) {
  if (adaptive) {
    lo = (i * out) / in - 1;
    hi = ((i + 1) * out + in - 1) / in + 1;
  } else {
    lo = i + pad >= kernel ? (i + pad - kernel) / stride : 0;
    hi = (i + pad) / stride + 1;
  }
  if (lo < 0) lo = 0;
  if (hi > out) hi = out;
}

// The outputs [oy0, oy1) x [ox0, ox1) among which lie all windows that cover input pixel (iy, ix).
struct PoolOutputRange {
  int64_t oy0, oy1, ox0, ox1;
};

CNN_HD PoolOutputRange pool_outputs_covering(const kernels::PoolGeometry& g, int64_t iy, int64_t ix) {
  PoolOutputRange r;
  pool_outputs_covering_axis(iy, g.h, g.oh, g.kh, g.stride_h, g.pad_h, g.adaptive, r.oy0, r.oy1);
  pool_outputs_covering_axis(ix, g.w, g.ow, g.kw, g.stride_w, g.pad_w, g.adaptive, r.ox0, r.ox1);
  return r;
}

// Flat NHWC positions of the element loops: (n, y, x, c) of element i of an [n, h, w, c] tensor.
struct PixelIndex {
  int64_t n, y, x, c;
};

CNN_HD PixelIndex pixel_index(int64_t i, int64_t h, int64_t w, int64_t c) {
  PixelIndex p;
  p.c = i % c;
  p.x = (i / c) % w;
  p.y = (i / (c * w)) % h;
  p.n = i / (c * w * h);
  return p;
}

}  // namespace cnn
