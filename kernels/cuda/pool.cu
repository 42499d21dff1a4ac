// Pooling CUDA kernels over NHWC. Forward: one thread per output element (grid-stride), reading its
// window (channel-innermost, so a warp reads 32 adjacent channels of each pixel: coalesced).
// Backward: one thread per input element, gathering the gradients of the outputs whose windows
// cover it (no atomics, deterministic); max pooling compares against the forward's saved argmax.
// The maximum follows kernels/common/max_math.h (a NaN in the window wins, then the first maximum).
// Traffic: forward reads each input about (kernel/stride)^2 times (mostly from cache), writes the
// output once; backward reads dy about as often and writes dx once.
#include <cmath>

#include "kernels/common/dispatch.h"
#include "kernels/common/half.h"
#include "kernels/common/max_math.h"
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
    const PixelIndex o = pixel_index(i, g.oh, g.ow, g.c);
    const PoolWindow win = pool_window(g, o.y, o.x);
    C best = -INFINITY;
    int64_t best_pos = win.h0 * g.w + win.w0;
    for (int64_t iy = win.h0; iy < win.h1; ++iy)
      for (int64_t ix = win.w0; ix < win.w1; ++ix) {
        const C v = to_compute(x[((o.n * g.h + iy) * g.w + ix) * g.c + o.c]);
        if (max_replaces(v, best)) {
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
    const PixelIndex p = pixel_index(i, g.h, g.w, g.c);
    const PoolOutputRange r = pool_outputs_covering(g, p.y, p.x);
    const int32_t pos = static_cast<int32_t>(p.y * g.w + p.x);
    C acc = 0;
    for (int64_t oy = r.oy0; oy < r.oy1; ++oy)
      for (int64_t ox = r.ox0; ox < r.ox1; ++ox) {
        const int64_t out = ((p.n * g.oh + oy) * g.ow + ox) * g.c + p.c;
        if (argmax[out] == pos) acc += to_compute(dy[out]);
      }
    dx[i] = from_compute<T>(acc);
  }
}

template <class T>
__global__ void avg_forward_kernel(PoolGeometry g, const T* x, T* y) {
  const int64_t total = g.n * g.oh * g.ow * g.c;
  for (int64_t i = CNN_GLOBAL_INDEX; i < total; i += CNN_GRID_STRIDE) {
    const PixelIndex o = pixel_index(i, g.oh, g.ow, g.c);
    y[i] = from_compute<T>(pool_window_mean(g, pool_window(g, o.y, o.x), x, o.n, o.c));
  }
}

template <class T>
__global__ void avg_backward_kernel(PoolGeometry g, const T* dy, T* dx) {
  using C = compute_t<T>;
  const int64_t total = g.n * g.h * g.w * g.c;
  for (int64_t i = CNN_GLOBAL_INDEX; i < total; i += CNN_GRID_STRIDE) {
    const PixelIndex p = pixel_index(i, g.h, g.w, g.c);
    const PoolOutputRange r = pool_outputs_covering(g, p.y, p.x);
    C acc = 0;
    for (int64_t oy = r.oy0; oy < r.oy1; ++oy)
      for (int64_t ox = r.ox0; ox < r.ox1; ++ox) {
        const PoolWindow win = pool_window(g, oy, ox);
        if (pool_window_contains(win, p.y, p.x))
          acc += to_compute(dy[((p.n * g.oh + oy) * g.ow + ox) * g.c + p.c]) / static_cast<C>(win.divisor);
      }
    dx[i] = from_compute<T>(acc);
  }
}

// Runs launch(T{}, blocks) for the storage type T of dt, with a grid-stride grid over `total` elements.
template <class Launch>
void launch_elements(DType dt, const char* name, int64_t total, Launch launch) {
  if (total == 0) return;
  dispatch_floating(dt, name, [&](auto tag) { launch(tag, grid_for(total, kThreads)); });
}
}  // namespace

void max_pool2d_forward(DType dt, const PoolGeometry& g, const void* x, void* y, int32_t* argmax, Stream stream) {
  launch_elements(dt, "max_pool2d_forward", g.n * g.oh * g.ow * g.c, [&](auto tag, unsigned blocks) {
    using T = decltype(tag);
    CNN_LAUNCH(max_forward_kernel<T>, blocks, kThreads, stream, g, static_cast<const T*>(x), static_cast<T*>(y), argmax);
  });
}

void max_pool2d_backward(DType dt, const PoolGeometry& g, const void* dy, const int32_t* argmax, void* dx, Stream stream) {
  launch_elements(dt, "max_pool2d_backward", g.n * g.h * g.w * g.c, [&](auto tag, unsigned blocks) {
    using T = decltype(tag);
    CNN_LAUNCH(max_backward_kernel<T>, blocks, kThreads, stream, g, static_cast<const T*>(dy), argmax, static_cast<T*>(dx));
  });
}

void avg_pool2d_forward(DType dt, const PoolGeometry& g, const void* x, void* y, Stream stream) {
  launch_elements(dt, "avg_pool2d_forward", g.n * g.oh * g.ow * g.c, [&](auto tag, unsigned blocks) {
    using T = decltype(tag);
    CNN_LAUNCH(avg_forward_kernel<T>, blocks, kThreads, stream, g, static_cast<const T*>(x), static_cast<T*>(y));
  });
}

void avg_pool2d_backward(DType dt, const PoolGeometry& g, const void* dy, void* dx, Stream stream) {
  launch_elements(dt, "avg_pool2d_backward", g.n * g.h * g.w * g.c, [&](auto tag, unsigned blocks) {
    using T = decltype(tag);
    CNN_LAUNCH(avg_backward_kernel<T>, blocks, kThreads, stream, g, static_cast<const T*>(dy), static_cast<T*>(dx));
  });
}

}  // namespace cnn::kernels::cuda
