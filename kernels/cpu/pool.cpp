// CPU reference for pooling over NHWC: one output element per (n, oy, ox, c). The average-pool
// backward gathers from the outputs whose windows cover each input element; the max-pool backward
// scatters each output's gradient to its argmax within its image (images in parallel).
#include <limits>
#include <vector>

#include "kernels/common/dispatch.h"
#include "kernels/common/half.h"
#include "kernels/common/pool_math.h"
#include "kernels/pool.h"

namespace cnn::kernels::cpu {

void max_pool2d_forward(DType dt, const PoolGeometry& g, const void* x, void* y, int32_t* argmax) {
  dispatch_floating(dt, "max_pool2d_forward", [&](auto tag) {
    using T = decltype(tag);
    using C = compute_t<T>;
    const T* xs = static_cast<const T*>(x);
    T* ys = static_cast<T*>(y);
    // Per-thread running maxima over a pixel's channels; the update is branch-free so that the
    // channel loop vectorises.
#pragma omp parallel
    {
      std::vector<C> best(static_cast<size_t>(g.c));
      std::vector<int32_t> where(static_cast<size_t>(g.c));
#pragma omp for collapse(2) schedule(static)
      for (int64_t n = 0; n < g.n; ++n)
        for (int64_t oy = 0; oy < g.oh; ++oy)
          for (int64_t ox = 0; ox < g.ow; ++ox) {
            const PoolWindow win = pool_window(g, oy, ox);
            std::fill(best.begin(), best.end(), -std::numeric_limits<C>::infinity());
            std::fill(where.begin(), where.end(), static_cast<int32_t>(win.h0 * g.w + win.w0));
            // Window pixels in row-major order, channels innermost (contiguous in NHWC).
            for (int64_t iy = win.h0; iy < win.h1; ++iy)
              for (int64_t ix = win.w0; ix < win.w1; ++ix) {
                const T* px = xs + ((n * g.h + iy) * g.w + ix) * g.c;
                const int32_t pos = static_cast<int32_t>(iy * g.w + ix);
                C* b = best.data();
                int32_t* wh = where.data();
                for (int64_t c = 0; c < g.c; ++c) {
                  const C v = to_compute(px[c]);
                  const bool take = v > b[c] || v != v;  // strict: the first maximum wins; NaN propagates
                  b[c] = take ? v : b[c];
                  wh[c] = take ? pos : wh[c];
                }
              }
            const int64_t out = ((n * g.oh + oy) * g.ow + ox) * g.c;
            for (int64_t c = 0; c < g.c; ++c) {
              ys[out + c] = from_compute<T>(best[static_cast<size_t>(c)]);
              argmax[out + c] = where[static_cast<size_t>(c)];
            }
          }
    }
  });
}

// Scatter per image: each output adds its gradient at its argmax. Images are independent, so the
// parallel loop over them needs no atomics, and the order within an image is fixed (deterministic).
void max_pool2d_backward(DType dt, const PoolGeometry& g, const void* dy, const int32_t* argmax, void* dx) {
  dispatch_floating(dt, "max_pool2d_backward", [&](auto tag) {
    using T = decltype(tag);
    using C = compute_t<T>;
    const T* dys = static_cast<const T*>(dy);
    T* dxs = static_cast<T*>(dx);
    const int64_t in_image = g.h * g.w * g.c, out_pixels = g.oh * g.ow;
#pragma omp parallel for schedule(static)
    for (int64_t n = 0; n < g.n; ++n) {
      std::vector<C> acc(static_cast<size_t>(in_image), C(0));
      for (int64_t p = 0; p < out_pixels; ++p)
        for (int64_t c = 0; c < g.c; ++c) {
          const int64_t out = (n * out_pixels + p) * g.c + c;
          acc[static_cast<size_t>(argmax[out] * g.c + c)] += to_compute(dys[out]);
        }
      for (int64_t i = 0; i < in_image; ++i) dxs[n * in_image + i] = from_compute<T>(acc[static_cast<size_t>(i)]);
    }
  });
}

void avg_pool2d_forward(DType dt, const PoolGeometry& g, const void* x, void* y) {
  dispatch_floating(dt, "avg_pool2d_forward", [&](auto tag) {
    using T = decltype(tag);
    using C = compute_t<T>;
    const T* xs = static_cast<const T*>(x);
    T* ys = static_cast<T*>(y);
#pragma omp parallel for collapse(2) schedule(static)
    for (int64_t n = 0; n < g.n; ++n)
      for (int64_t oy = 0; oy < g.oh; ++oy)
        for (int64_t ox = 0; ox < g.ow; ++ox) {
          const PoolWindow win = pool_window(g, oy, ox);
          for (int64_t c = 0; c < g.c; ++c) {
            C acc = 0;
            for (int64_t iy = win.h0; iy < win.h1; ++iy)
              for (int64_t ix = win.w0; ix < win.w1; ++ix) acc += to_compute(xs[((n * g.h + iy) * g.w + ix) * g.c + c]);
            ys[((n * g.oh + oy) * g.ow + ox) * g.c + c] = from_compute<T>(acc / static_cast<C>(win.divisor));
          }
        }
  });
}

void avg_pool2d_backward(DType dt, const PoolGeometry& g, const void* dy, void* dx) {
  dispatch_floating(dt, "avg_pool2d_backward", [&](auto tag) {
    using T = decltype(tag);
    using C = compute_t<T>;
    const T* dys = static_cast<const T*>(dy);
    T* dxs = static_cast<T*>(dx);
    // Per input pixel: the outputs whose windows cover it, each window worked out once, its share
    // added for all channels at once (contiguous in NHWC).
#pragma omp parallel
    {
      std::vector<C> acc(static_cast<size_t>(g.c));
#pragma omp for collapse(2) schedule(static)
      for (int64_t n = 0; n < g.n; ++n)
        for (int64_t iy = 0; iy < g.h; ++iy)
          for (int64_t ix = 0; ix < g.w; ++ix) {
            int64_t y0, y1, x0, x1;
            pool_outputs_covering(iy, g.h, g.oh, g.kh, g.stride_h, g.pad_h, g.adaptive, y0, y1);
            pool_outputs_covering(ix, g.w, g.ow, g.kw, g.stride_w, g.pad_w, g.adaptive, x0, x1);
            std::fill(acc.begin(), acc.end(), C(0));
            for (int64_t oy = y0; oy < y1; ++oy)
              for (int64_t ox = x0; ox < x1; ++ox) {
                const PoolWindow win = pool_window(g, oy, ox);
                if (iy < win.h0 || iy >= win.h1 || ix < win.w0 || ix >= win.w1) continue;
                const T* grad = dys + ((n * g.oh + oy) * g.ow + ox) * g.c;
                const C divisor = static_cast<C>(win.divisor);
                for (int64_t c = 0; c < g.c; ++c) acc[static_cast<size_t>(c)] += to_compute(grad[c]) / divisor;
              }
            T* out = dxs + ((n * g.h + iy) * g.w + ix) * g.c;
            for (int64_t c = 0; c < g.c; ++c) out[c] = from_compute<T>(acc[static_cast<size_t>(c)]);
          }
    }
  });
}

}  // namespace cnn::kernels::cpu
