// CPU reference for pooling over NHWC: one output element per (n, oy, ox, c). The average-pool
// backward gathers from the outputs whose windows cover each input element, and so does the max-pool
// backward, where the argmax points at the element (kernels/cpu/pool_loops.h). The maximum
// follows kernels/common/max_math.h (a NaN in the window wins, then the first maximum).
#include <algorithm>
#include <limits>
#include <type_traits>
#include <vector>

#include "kernels/common/dispatch.h"
#include "kernels/common/half.h"
#include "kernels/common/max_math.h"
#include "kernels/common/pool_math.h"
#include "kernels/cpu/pool_loops.h"
#include "kernels/pool.h"

namespace cnn::kernels::cpu {

using namespace pool_loops;

void max_pool2d_forward(DType dt, const PoolGeometry& g, const void* x, void* y, int32_t* argmax, Stream) {
  dispatch_floating(dt, "max_pool2d_forward", [&](auto tag) {
    using T = decltype(tag);
    using C = compute_t<T>;
    const T* xs = static_cast<const T*>(x);
    max_pool_forward<T, C>(g, [&](int64_t pixel, T*) { return xs + pixel * g.c; }, static_cast<T*>(y), argmax);
  });
}

// Each input pixel's gradient gathered from the outputs that cover it (kernels/cpu/pool_loops.h).
void max_pool2d_backward(DType dt, const PoolGeometry& g, const void* dy, const int32_t* argmax, void* dx, Stream) {
  dispatch_floating(dt, "max_pool2d_backward", [&](auto tag) {
    using T = decltype(tag);
    using C = compute_t<T>;
    const T* dys = static_cast<const T*>(dy);
    T* dxs = static_cast<T*>(dx);
    // Summed straight into dx when T is the compute type (f32, f64), else in a buffer rounded once.
    constexpr bool kInPlace = std::is_same_v<T, C>;
    const CoveringOutputs covering(g);
    const auto make_scratch = [&] { return std::vector<C>(kInPlace ? 0 : static_cast<size_t>(g.c)); };
    parallel_pixels(g.n, g.h, g.w, make_scratch, [&](std::vector<C>& buffer, int64_t n, int64_t iy, int64_t ix) {
      T* out = dxs + ((n * g.h + iy) * g.w + ix) * g.c;
      if constexpr (kInPlace) {
        max_pool_input_gradient<T, C>(g, covering, dys, argmax, n, iy, ix, out);
      } else {
        max_pool_input_gradient<T, C>(g, covering, dys, argmax, n, iy, ix, buffer.data());
        for (int64_t c = 0; c < g.c; ++c) out[c] = from_compute<T>(buffer[static_cast<size_t>(c)]);
      }
    });
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
    // Per input pixel: the outputs whose windows cover it (the exact ranges, worked out once per
    // call as for the max pool), each window's share added for all channels at once (contiguous in
    // NHWC). A window clipped to the input still covers every input pixel its full extent did.
    const CoveringOutputs covering(g);
    const auto make_scratch = [&] { return std::vector<C>(static_cast<size_t>(g.c)); };
    parallel_pixels(g.n, g.h, g.w, make_scratch, [&](std::vector<C>& acc, int64_t n, int64_t iy, int64_t ix) {
      std::fill(acc.begin(), acc.end(), C(0));
      for (int64_t oy = covering.oy0[iy]; oy < covering.oy1[iy]; ++oy)
        for (int64_t ox = covering.ox0[ix]; ox < covering.ox1[ix]; ++ox) {
          const PoolWindow win = pool_window(g, oy, ox);
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
