// Pooling CUDA kernels over NHWC. Forward: one thread per output element (grid-stride), reading its
// window (channel-innermost, so a warp reads 32 adjacent channels of each pixel: coalesced).
// Backward: one thread per input element, gathering the gradients of the outputs whose windows
// cover it (no atomics, deterministic); max pooling compares against the forward's saved argmax.
// Traffic: forward reads each input about (kernel/stride)^2 times (mostly from cache), writes the
// output once; backward reads dy about as often and writes dx once.
#include <cmath>

#include "kernels/common/dispatch.h"
#include "kernels/common/half.h"
#include "kernels/common/pool_math.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/pool.h"

namespace cnn::kernels::cuda {

namespace {
constexpr int kThreads = kBlockThreads;

template <class T>
__global__ void max_forward_kernel(PoolGeometry g, const T* x, T* y, int32_t* argmax) {
  using C = compute_t<T>;
  const int64_t total = g.n * g.oh * g.ow * g.c;
  for (int64_t i = CNN_GLOBAL_INDEX; i < total; i += CNN_GRID_STRIDE) {
    const int64_t c = i % g.c, ox = (i / g.c) % g.ow, oy = (i / (g.c * g.ow)) % g.oh, n = i / (g.c * g.ow * g.oh);
    const PoolWindow win = pool_window(g, oy, ox);
    C best = -INFINITY;
    int64_t best_pos = win.h0 * g.w + win.w0;
    for (int64_t iy = win.h0; iy < win.h1; ++iy)
      for (int64_t ix = win.w0; ix < win.w1; ++ix) {
        const C v = to_compute(x[((n * g.h + iy) * g.w + ix) * g.c + c]);
        if (v > best || v != v) {
          best = v;
          best_pos = iy * g.w + ix;
        }
      }
    y[i] = from_compute<T>(best);
    argmax[i] = static_cast<int32_t>(best_pos);
  }
}

template <class T>
__global__ void max_backward_kernel(PoolGeometry g, const T* dy, const int32_t* argmax, T* dx) {
  using C = compute_t<T>;
  const int64_t total = g.n * g.h * g.w * g.c;
  for (int64_t i = CNN_GLOBAL_INDEX; i < total; i += CNN_GRID_STRIDE) {
    const int64_t c = i % g.c, ix = (i / g.c) % g.w, iy = (i / (g.c * g.w)) % g.h, n = i / (g.c * g.w * g.h);
    int64_t y0, y1, x0, x1;
    pool_outputs_covering(iy, g.h, g.oh, g.kh, g.stride_h, g.pad_h, g.adaptive, y0, y1);
    pool_outputs_covering(ix, g.w, g.ow, g.kw, g.stride_w, g.pad_w, g.adaptive, x0, x1);
    const int32_t pos = static_cast<int32_t>(iy * g.w + ix);
    C acc = 0;
    for (int64_t oy = y0; oy < y1; ++oy)
      for (int64_t ox = x0; ox < x1; ++ox) {
        const int64_t out = ((n * g.oh + oy) * g.ow + ox) * g.c + c;
        if (argmax[out] == pos) acc += to_compute(dy[out]);
      }
    dx[i] = from_compute<T>(acc);
  }
}

template <class T>
__global__ void avg_forward_kernel(PoolGeometry g, const T* x, T* y) {
  using C = compute_t<T>;
  const int64_t total = g.n * g.oh * g.ow * g.c;
  for (int64_t i = CNN_GLOBAL_INDEX; i < total; i += CNN_GRID_STRIDE) {
    const int64_t c = i % g.c, ox = (i / g.c) % g.ow, oy = (i / (g.c * g.ow)) % g.oh, n = i / (g.c * g.ow * g.oh);
    const PoolWindow win = pool_window(g, oy, ox);
    C acc = 0;
    for (int64_t iy = win.h0; iy < win.h1; ++iy)
      for (int64_t ix = win.w0; ix < win.w1; ++ix) acc += to_compute(x[((n * g.h + iy) * g.w + ix) * g.c + c]);
    y[i] = from_compute<T>(acc / static_cast<C>(win.divisor));
  }
}

template <class T>
__global__ void avg_backward_kernel(PoolGeometry g, const T* dy, T* dx) {
  using C = compute_t<T>;
  const int64_t total = g.n * g.h * g.w * g.c;
  for (int64_t i = CNN_GLOBAL_INDEX; i < total; i += CNN_GRID_STRIDE) {
    const int64_t c = i % g.c, ix = (i / g.c) % g.w, iy = (i / (g.c * g.w)) % g.h, n = i / (g.c * g.w * g.h);
    int64_t y0, y1, x0, x1;
    pool_outputs_covering(iy, g.h, g.oh, g.kh, g.stride_h, g.pad_h, g.adaptive, y0, y1);
    pool_outputs_covering(ix, g.w, g.ow, g.kw, g.stride_w, g.pad_w, g.adaptive, x0, x1);
    C acc = 0;
    for (int64_t oy = y0; oy < y1; ++oy)
      for (int64_t ox = x0; ox < x1; ++ox) {
        const PoolWindow win = pool_window(g, oy, ox);
        if (iy >= win.h0 && iy < win.h1 && ix >= win.w0 && ix < win.w1)
          acc += to_compute(dy[((n * g.oh + oy) * g.ow + ox) * g.c + c]) / static_cast<C>(win.divisor);
      }
    dx[i] = from_compute<T>(acc);
  }
}
}  // namespace

void max_pool2d_forward(DType dt, const PoolGeometry& g, const void* x, void* y, int32_t* argmax, Stream stream) {
  const int64_t total = g.n * g.oh * g.ow * g.c;
  if (total == 0) return;
  dispatch_floating(dt, "max_pool2d_forward", [&](auto tag) {
    using T = decltype(tag);
    CNN_LAUNCH(max_forward_kernel<T>, grid_for(total, kThreads), kThreads, stream, g, static_cast<const T*>(x),
               static_cast<T*>(y), argmax);
  });
}

void max_pool2d_backward(DType dt, const PoolGeometry& g, const void* dy, const int32_t* argmax, void* dx, Stream stream) {
  const int64_t total = g.n * g.h * g.w * g.c;
  if (total == 0) return;
  dispatch_floating(dt, "max_pool2d_backward", [&](auto tag) {
    using T = decltype(tag);
    CNN_LAUNCH(max_backward_kernel<T>, grid_for(total, kThreads), kThreads, stream, g, static_cast<const T*>(dy), argmax,
               static_cast<T*>(dx));
  });
}

void avg_pool2d_forward(DType dt, const PoolGeometry& g, const void* x, void* y, Stream stream) {
  const int64_t total = g.n * g.oh * g.ow * g.c;
  if (total == 0) return;
  dispatch_floating(dt, "avg_pool2d_forward", [&](auto tag) {
    using T = decltype(tag);
    CNN_LAUNCH(avg_forward_kernel<T>, grid_for(total, kThreads), kThreads, stream, g, static_cast<const T*>(x),
               static_cast<T*>(y));
  });
}

void avg_pool2d_backward(DType dt, const PoolGeometry& g, const void* dy, void* dx, Stream stream) {
  const int64_t total = g.n * g.h * g.w * g.c;
  if (total == 0) return;
  dispatch_floating(dt, "avg_pool2d_backward", [&](auto tag) {
    using T = decltype(tag);
    CNN_LAUNCH(avg_backward_kernel<T>, grid_for(total, kThreads), kThreads, stream, g, static_cast<const T*>(dy),
               static_cast<T*>(dx));
  });
}

}  // namespace cnn::kernels::cuda
