// CPU reference for pooling over NHWC: one output element per (n, oy, ox, c). The average-pool
// backward gathers from the outputs whose windows cover each input element; the max-pool backward
// scatters each output's gradient to its argmax within its image (images in parallel), or, when the
// windows cannot overlap, writes each window's input gradients once. The maximum
// follows kernels/common/max_math.h (a NaN in the window wins, then the first maximum).
#include <algorithm>
#include <limits>
#include <type_traits>
#include <vector>

#include "kernels/common/dispatch.h"
#include "kernels/common/half.h"
#include "kernels/common/max_math.h"
#include "kernels/common/pool_math.h"
#include "kernels/pool.h"

namespace cnn::kernels::cpu {

namespace {
// Runs body(scratch, n, y, x) for every pixel of [images, rows, cols], images and rows shared out
// among the threads; each thread makes its own scratch (per-channel buffers, or nothing) once.
template <class MakeScratch, class Body>
void parallel_pixels(int64_t images, int64_t rows, int64_t cols, MakeScratch make_scratch, Body body) {
#pragma omp parallel
  {
    auto scratch = make_scratch();
#pragma omp for collapse(2) schedule(static)
    for (int64_t n = 0; n < images; ++n)
      for (int64_t y = 0; y < rows; ++y)
        for (int64_t x = 0; x < cols; ++x) body(scratch, n, y, x);
  }
}

template <class C>
struct RunningMax {
  std::vector<C> best;
  std::vector<int32_t> where;
};
}  // namespace

void max_pool2d_forward(DType dt, const PoolGeometry& g, const void* x, void* y, int32_t* argmax, Stream) {
  dispatch_floating(dt, "max_pool2d_forward", [&](auto tag) {
    using T = decltype(tag);
    using C = compute_t<T>;
    const T* xs = static_cast<const T*>(x);
    T* ys = static_cast<T*>(y);
    const auto make_scratch = [&] {
      return RunningMax<C>{std::vector<C>(static_cast<size_t>(g.c)), std::vector<int32_t>(static_cast<size_t>(g.c))};
    };
    // Per-thread running maxima over a pixel's channels; the update is branch-free so that the
    // channel loop vectorises.
    parallel_pixels(g.n, g.oh, g.ow, make_scratch, [&](RunningMax<C>& m, int64_t n, int64_t oy, int64_t ox) {
      const PoolWindow win = pool_window(g, oy, ox);
      std::fill(m.best.begin(), m.best.end(), -std::numeric_limits<C>::infinity());
      std::fill(m.where.begin(), m.where.end(), static_cast<int32_t>(win.h0 * g.w + win.w0));
      C* b = m.best.data();
      int32_t* wh = m.where.data();
      // Window pixels in row-major order, channels innermost (contiguous in NHWC).
      for (int64_t iy = win.h0; iy < win.h1; ++iy)
        for (int64_t ix = win.w0; ix < win.w1; ++ix) {
          const T* px = xs + ((n * g.h + iy) * g.w + ix) * g.c;
          const int32_t pos = static_cast<int32_t>(iy * g.w + ix);
          for (int64_t c = 0; c < g.c; ++c) {
            const C v = to_compute(px[c]);
            const bool take = max_replaces(v, b[c]);
            b[c] = take ? v : b[c];
            wh[c] = take ? pos : wh[c];
          }
        }
      const int64_t out = ((n * g.oh + oy) * g.ow + ox) * g.c;
      for (int64_t c = 0; c < g.c; ++c) {
        ys[out + c] = from_compute<T>(b[c]);
        argmax[out + c] = wh[c];
      }
    });
  });
}

// Scatter per image: each output adds its gradient at its argmax. Images are independent, so the
// parallel loop over them needs no atomics, and the order within an image is fixed (deterministic).
// When the windows cannot overlap (stride >= kernel: the 2x2/2 pools of VGG-like nets), every input
// element has at most one output, and the gradient is gathered instead: each window's elements
// written once, its argmax's with the output's gradient and the others with zero, with no zero-fill
// pass before (a zero-fill only where windows leave part of the image uncovered). The values are
// the scatter's: 0 + dy, in the compute type, rounded once.
void max_pool2d_backward(DType dt, const PoolGeometry& g, const void* dy, const int32_t* argmax, void* dx, Stream) {
  dispatch_floating(dt, "max_pool2d_backward", [&](auto tag) {
    using T = decltype(tag);
    using C = compute_t<T>;
    const T* dys = static_cast<const T*>(dy);
    T* dxs = static_cast<T*>(dx);
    const int64_t in_image = g.h * g.w * g.c, out_pixels = g.oh * g.ow;
    const bool disjoint = !g.adaptive && g.stride_h >= g.kh && g.stride_w >= g.kw;
    if (disjoint) {
      const bool tiled = g.pad_h == 0 && g.pad_w == 0 && g.oh * g.stride_h == g.h && g.ow * g.stride_w == g.w &&
                         g.kh == g.stride_h && g.kw == g.stride_w;
      if (!tiled) std::fill(dxs, dxs + g.n * in_image, from_compute<T>(C(0)));
      parallel_pixels(g.n, g.oh, g.ow, [] { return 0; }, [&](int /*no scratch*/, int64_t n, int64_t oy, int64_t ox) {
        const PoolWindow win = pool_window(g, oy, ox);
        const int64_t out = ((n * g.oh + oy) * g.ow + ox) * g.c;
        const int32_t* where = argmax + out;
        const T* grad = dys + out;
        for (int64_t iy = win.h0; iy < win.h1; ++iy)
          for (int64_t ix = win.w0; ix < win.w1; ++ix) {
            const int32_t pos = static_cast<int32_t>(iy * g.w + ix);
            T* dst = dxs + n * in_image + pos * g.c;
            for (int64_t c = 0; c < g.c; ++c)
              dst[c] = from_compute<T>(where[c] == pos ? C(0) + to_compute(grad[c]) : C(0));
          }
      });
      return;
    }
    // Each image's gradients summed in the compute type, in output order: straight into dx when T is
    // the compute type (f32, f64), else in a buffer rounded once at the end.
    constexpr bool kInPlace = std::is_same_v<T, C>;
#pragma omp parallel for schedule(static)
    for (int64_t n = 0; n < g.n; ++n) {
      std::vector<C> buffer(kInPlace ? 0 : static_cast<size_t>(in_image));
      C* acc = buffer.data();
      if constexpr (kInPlace) acc = dxs + n * in_image;
      std::fill(acc, acc + in_image, C(0));
      for (int64_t p = 0; p < out_pixels; ++p) {
        const int64_t out = (n * out_pixels + p) * g.c;
        const int32_t* where = argmax + out;
        for (int64_t c = 0; c < g.c; ++c) acc[where[c] * g.c + c] += to_compute(dys[out + c]);
      }
      if constexpr (!kInPlace)
        for (int64_t i = 0; i < in_image; ++i) dxs[n * in_image + i] = from_compute<T>(acc[i]);
    }
  });
}

void avg_pool2d_forward(DType dt, const PoolGeometry& g, const void* x, void* y, Stream) {
  dispatch_floating(dt, "avg_pool2d_forward", [&](auto tag) {
    using T = decltype(tag);
    const T* xs = static_cast<const T*>(x);
    T* ys = static_cast<T*>(y);
    parallel_pixels(g.n, g.oh, g.ow, [] { return 0; }, [&](int /*no scratch*/, int64_t n, int64_t oy, int64_t ox) {
      const PoolWindow win = pool_window(g, oy, ox);
      T* out = ys + ((n * g.oh + oy) * g.ow + ox) * g.c;
      for (int64_t c = 0; c < g.c; ++c) out[c] = from_compute<T>(pool_window_mean(g, win, xs, n, c));
    });
  });
}

void avg_pool2d_backward(DType dt, const PoolGeometry& g, const void* dy, void* dx, Stream) {
  dispatch_floating(dt, "avg_pool2d_backward", [&](auto tag) {
    using T = decltype(tag);
    using C = compute_t<T>;
    const T* dys = static_cast<const T*>(dy);
    T* dxs = static_cast<T*>(dx);
    // Per input pixel: the outputs whose windows cover it, each window worked out once, its share
    // added for all channels at once (contiguous in NHWC).
    const auto make_scratch = [&] { return std::vector<C>(static_cast<size_t>(g.c)); };
    parallel_pixels(g.n, g.h, g.w, make_scratch, [&](std::vector<C>& acc, int64_t n, int64_t iy, int64_t ix) {
      const PoolOutputRange r = pool_outputs_covering(g, iy, ix);
      std::fill(acc.begin(), acc.end(), C(0));
      for (int64_t oy = r.oy0; oy < r.oy1; ++oy)
        for (int64_t ox = r.ox0; ox < r.ox1; ++ox) {
          const PoolWindow win = pool_window(g, oy, ox);
          if (!pool_window_contains(win, iy, ix)) continue;
          const T* grad = dys + ((n * g.oh + oy) * g.ow + ox) * g.c;
          const C divisor = static_cast<C>(win.divisor);
          for (int64_t c = 0; c < g.c; ++c) acc[static_cast<size_t>(c)] += to_compute(grad[c]) / divisor;
        }
      T* out = dxs + ((n * g.h + iy) * g.w + ix) * g.c;
      for (int64_t c = 0; c < g.c; ++c) out[c] = from_compute<T>(acc[static_cast<size_t>(c)]);
    });
  });
}

}  // namespace cnn::kernels::cpu
