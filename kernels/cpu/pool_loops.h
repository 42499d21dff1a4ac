// The loops of the CPU max-pool kernels, shared by plain max pooling (kernels/cpu/pool.cpp) and the
// BatchNorm + ReLU + max-pool kernels (kernels/cpu/batch_norm_pool.cpp), which pool values they
// compute on the fly and must give the same bits as the two ops run one after the other.
//
// Forward: one output pixel at a time, a running maximum per channel over the window in row-major
// order (kernels/common/max_math.h: a NaN wins, then the first maximum), branch-free so that the
// channel loop vectorises. Backward: the gradient of one input pixel gathered from the outputs whose
// windows cover it, in output order, where the argmax points at it: each input element written
// once, with no zero-fill pass. The sums are those of a scatter in output order starting from zero
// (adding an output that does not point at the element adds nothing), so the bits do not depend on
// which way the gradient is formed.
#pragma once
#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

#include "kernels/common/half.h"
#include "kernels/common/max_math.h"
#include "kernels/common/pool_math.h"
#include "kernels/pool.h"

namespace cnn::kernels::cpu::pool_loops {

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

template <class T, class C>
struct RunningMax {
  std::vector<C> best;
  std::vector<int32_t> where;
  std::vector<T> row;  // room for one input pixel's values, for inputs computed on the fly
};

// y and argmax of max pooling over the input pixels' values: row_of(pixel, buffer) returns the c
// values of input pixel `pixel` (the flat (n * H + iy) * W + ix) as T, either where they are or
// written into `buffer` (room for c values of this thread's). Pooled in the compute type C, y
// stored as T.
template <class T, class C, class RowOf>
void max_pool_forward(const PoolGeometry& g, RowOf row_of, T* y, int32_t* argmax) {
  const auto make_scratch = [&] {
    const auto c = static_cast<size_t>(g.c);
    return RunningMax<T, C>{std::vector<C>(c), std::vector<int32_t>(c), std::vector<T>(c)};
  };
  parallel_pixels(g.n, g.oh, g.ow, make_scratch, [&](RunningMax<T, C>& m, int64_t n, int64_t oy, int64_t ox) {
    const PoolWindow win = pool_window(g, oy, ox);
    std::fill(m.best.begin(), m.best.end(), -std::numeric_limits<C>::infinity());
    std::fill(m.where.begin(), m.where.end(), static_cast<int32_t>(win.h0 * g.w + win.w0));
    C* __restrict b = m.best.data();
    int32_t* __restrict wh = m.where.data();
    // Window pixels in row-major order, channels innermost (contiguous in NHWC).
    for (int64_t iy = win.h0; iy < win.h1; ++iy)
      for (int64_t ix = win.w0; ix < win.w1; ++ix) {
        const T* __restrict px = row_of((n * g.h + iy) * g.w + ix, m.row.data());
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
      y[out + c] = from_compute<T>(b[c]);
      argmax[out + c] = wh[c];
    }
  });
}

// The outputs [lo, hi) along one axis whose windows (start o * stride - pad, `kernel` long) contain
// input index i: exactly those, so the gather needs no membership test (clipping a window to the
// image never removes an index inside it).
inline void max_pool_covering(int64_t i, int64_t out, int kernel, int stride, int pad, int64_t& lo, int64_t& hi) {
  const int64_t first = i + pad - kernel + 1, last = i + pad;  // o * stride must lie in [first, last]
  lo = first <= 0 ? 0 : (first + stride - 1) / stride;
  hi = std::min(out, last / stride + 1);
}

// Adaptive bins: the exact outputs [lo, hi) whose bins contain input index i (bins are contiguous
// and ordered, so those outputs are too), from pool_math.h's superset.
inline void adaptive_covering(int64_t i, int64_t in, int64_t out, int64_t& lo, int64_t& hi) {
  pool_outputs_covering_axis(i, in, out, 0, 1, 0, true, lo, hi);
  while (lo < hi && !(adaptive_start(lo, in, out) <= i && i < adaptive_end(lo, in, out))) ++lo;
  while (hi > lo && !(adaptive_start(hi - 1, in, out) <= i && i < adaptive_end(hi - 1, in, out))) --hi;
}

// The covering outputs of every input row and column, worked out once per call (no divisions and no
// membership tests in the per-pixel loops).
struct CoveringOutputs {
  std::vector<int64_t> oy0, oy1, ox0, ox1;
  explicit CoveringOutputs(const PoolGeometry& g)
      : oy0(static_cast<size_t>(g.h)), oy1(static_cast<size_t>(g.h)), ox0(static_cast<size_t>(g.w)),
        ox1(static_cast<size_t>(g.w)) {
    for (int64_t iy = 0; iy < g.h; ++iy) {
      if (g.adaptive)
        adaptive_covering(iy, g.h, g.oh, oy0[iy], oy1[iy]);
      else
        max_pool_covering(iy, g.oh, g.kh, g.stride_h, g.pad_h, oy0[iy], oy1[iy]);
    }
    for (int64_t ix = 0; ix < g.w; ++ix) {
      if (g.adaptive)
        adaptive_covering(ix, g.w, g.ow, ox0[ix], ox1[ix]);
      else
        max_pool_covering(ix, g.ow, g.kw, g.stride_w, g.pad_w, ox0[ix], ox1[ix]);
    }
  }
};

// acc[0..C) = the gradient of input pixel (n, iy, ix) from the outputs' gradients dy and argmax.
template <class T, class C>
[[gnu::always_inline]] inline void max_pool_input_gradient(const PoolGeometry& g, const CoveringOutputs& covering, const T* dy,
                             const int32_t* argmax, int64_t n, int64_t iy, int64_t ix, C* __restrict acc) {
  const int32_t pos = static_cast<int32_t>(iy * g.w + ix);
  const int64_t oy0 = covering.oy0[iy], oy1 = covering.oy1[iy], ox0 = covering.ox0[ix], ox1 = covering.ox1[ix];
  if (oy1 - oy0 == 1 && ox1 - ox0 == 1) {
    // One covering output (always, for windows that do not overlap): the sum below with its one
    // term, 0 + (the gradient where the argmax points here, else 0), in one pass.
    const int64_t out = ((n * g.oh + oy0) * g.ow + ox0) * g.c;
    const int32_t* __restrict where = argmax + out;
    const T* __restrict grad = dy + out;
    for (int64_t c = 0; c < g.c; ++c) acc[c] = C(0) + (where[c] == pos ? to_compute(grad[c]) : C(0));
    return;
  }
  std::fill(acc, acc + g.c, C(0));
  for (int64_t oy = oy0; oy < oy1; ++oy)
    for (int64_t ox = ox0; ox < ox1; ++ox) {
      const int64_t out = ((n * g.oh + oy) * g.ow + ox) * g.c;
      const int32_t* __restrict where = argmax + out;
      const T* __restrict grad = dy + out;
      for (int64_t c = 0; c < g.c; ++c) acc[c] += where[c] == pos ? to_compute(grad[c]) : C(0);
    }
}

}  // namespace cnn::kernels::cpu::pool_loops
