// CPU convolution, NHWC. Per chunk of samples and per group: im2col gathers each output pixel's
// receptive field into a row of [chunk*OH*OW, KH*KW*Cg] (contiguous reads in NHWC), then one GEMM
// against the group's weights [Og, KH*KW*Cg] writes the group's output channels (consecutive
// samples' outputs are consecutive rows in NHWC, so a chunk is one GEMM). Chunks hold as many
// samples as fit a 32 MiB column buffer, so small images make few large GEMMs. Backward data is
// the transposed GEMM followed by col2im (accumulating); backward filter accumulates dY^T col.
// Depthwise-style convolutions (one input channel per group) use direct loops instead. A 1x1
// convolution with stride 1 and no padding needs no im2col at all: in NHWC its input already is the
// column matrix [N*H*W, C] (a group's columns at a row stride of C), so each pass is one GEMM.
// f16/bf16 are widened to float, computed, and rounded back.
#include <algorithm>
#include <atomic>
#include <memory>
#include <vector>

#include "kernels/common/dispatch.h"
#include "kernels/common/half.h"
#include "kernels/conv.h"
#include "kernels/gemm.h"

namespace cnn::kernels::cpu {

namespace {
template <class T>
constexpr DType dtype_for() {
  return std::is_same_v<T, double> ? DType::f64 : DType::f32;
}

// Input coordinate of kernel tap k at output position o, or -1 when it falls in the padding.
inline int64_t input_index(int64_t o, int64_t k, int stride, int pad, int dilation, int64_t size) {
  const int64_t i = o * stride - pad + k * dilation;
  return i >= 0 && i < size ? i : -1;
}

// col[p, (kh, kw, ci)] = x[n, ih, iw, g*Cg + ci] (0 in the padding)
template <class T>
void im2col(const ConvGeometry& g, const T* x, int64_t n, int64_t group, T* col) {
  const int64_t cg = g.group_in(), k = g.kh * g.kw * cg;
#pragma omp parallel for schedule(static) if (g.oh * g.ow * k > 65536)
  for (int64_t oy = 0; oy < g.oh; ++oy) {
    for (int64_t ox = 0; ox < g.ow; ++ox) {
      T* row = col + (oy * g.ow + ox) * k;
      for (int64_t ky = 0; ky < g.kh; ++ky) {
        const int64_t iy = input_index(oy, ky, g.stride_h, g.pad_h, g.dilation_h, g.h);
        for (int64_t kx = 0; kx < g.kw; ++kx) {
          const int64_t ix = input_index(ox, kx, g.stride_w, g.pad_w, g.dilation_w, g.w);
          T* dst = row + (ky * g.kw + kx) * cg;
          if (iy < 0 || ix < 0) {
            std::fill(dst, dst + cg, T(0));
          } else {
            const T* src = x + ((n * g.h + iy) * g.w + ix) * g.c + group * cg;
            std::copy(src, src + cg, dst);
          }
        }
      }
    }
  }
}

// dx[n, ih, iw, g*Cg + ci] += col[p, (kh, kw, ci)]; serial over output pixels (taps overlap).
template <class T>
void col2im_add(const ConvGeometry& g, const T* col, int64_t n, int64_t group, T* dx) {
  const int64_t cg = g.group_in(), k = g.kh * g.kw * cg;
  for (int64_t oy = 0; oy < g.oh; ++oy)
    for (int64_t ox = 0; ox < g.ow; ++ox) {
      const T* row = col + (oy * g.ow + ox) * k;
      for (int64_t ky = 0; ky < g.kh; ++ky) {
        const int64_t iy = input_index(oy, ky, g.stride_h, g.pad_h, g.dilation_h, g.h);
        if (iy < 0) continue;
        for (int64_t kx = 0; kx < g.kw; ++kx) {
          const int64_t ix = input_index(ox, kx, g.stride_w, g.pad_w, g.dilation_w, g.w);
          if (ix < 0) continue;
          T* dst = dx + ((n * g.h + iy) * g.w + ix) * g.c + group * cg;
          const T* src = row + (ky * g.kw + kx) * cg;
          for (int64_t ci = 0; ci < cg; ++ci) dst[ci] += src[ci];
        }
      }
    }
}

// ---- depthwise: one input channel per group, output channel o reads input channel o / multiplier ----
// The weights are first transposed to [KH, KW, O], so that for each output pixel and tap the loop
// over channels reads the input, the weights and the output contiguously (and vectorises) in NHWC.

template <class T>
std::vector<T> taps_by_channel(const ConvGeometry& g, const T* w) {  // [O, KH, KW] -> [KH, KW, O]
  std::vector<T> wt(static_cast<size_t>(g.kh * g.kw * g.o));
  for (int64_t o = 0; o < g.o; ++o)
    for (int64_t t = 0; t < g.kh * g.kw; ++t) wt[static_cast<size_t>(t * g.o + o)] = w[o * g.kh * g.kw + t];
  return wt;
}

// body(input pixel offset, tap index) for every tap of output pixel (oy, ox) inside the image.
template <class Body>
inline void for_each_tap(const ConvGeometry& g, int64_t n, int64_t oy, int64_t ox, Body body) {
  for (int64_t ky = 0; ky < g.kh; ++ky) {
    const int64_t iy = input_index(oy, ky, g.stride_h, g.pad_h, g.dilation_h, g.h);
    if (iy < 0) continue;
    for (int64_t kx = 0; kx < g.kw; ++kx) {
      const int64_t ix = input_index(ox, kx, g.stride_w, g.pad_w, g.dilation_w, g.w);
      if (ix >= 0) body(((n * g.h + iy) * g.w + ix) * g.c, ky * g.kw + kx);
    }
  }
}

template <class T>
void depthwise_forward(const ConvGeometry& g, const T* x, const T* w, T* y) {
  const int64_t mult = g.o / g.c;
  const std::vector<T> wt = taps_by_channel(g, w);
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t n = 0; n < g.n; ++n)
    for (int64_t oy = 0; oy < g.oh; ++oy)
      for (int64_t ox = 0; ox < g.ow; ++ox) {
        T* out = y + ((n * g.oh + oy) * g.ow + ox) * g.o;
        std::fill(out, out + g.o, T(0));
        for_each_tap(g, n, oy, ox, [&](int64_t in_offset, int64_t tap) {
          const T* in = x + in_offset;
          const T* wk = wt.data() + tap * g.o;
          if (mult == 1)
            for (int64_t o = 0; o < g.o; ++o) out[o] += in[o] * wk[o];
          else
            for (int64_t o = 0; o < g.o; ++o) out[o] += in[o / mult] * wk[o];
        });
      }
}

// dx: samples in parallel (each writes its own); dw: one partial per sample, summed in sample order
// afterwards, so the result does not depend on the thread count.
template <class T>
void depthwise_backward(const ConvGeometry& g, const T* x, const T* w, const T* dy, T* dx, T* dw) {
  const int64_t mult = g.o / g.c, taps = g.kh * g.kw;
  const std::vector<T> wt = w ? taps_by_channel(g, w) : std::vector<T>();
  std::vector<T> partial(dw ? static_cast<size_t>(g.n * taps * g.o) : 0, T(0));
  if (dx) std::fill(dx, dx + g.n * g.h * g.w * g.c, T(0));
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < g.n; ++n) {
    T* dw_n = dw ? partial.data() + n * taps * g.o : nullptr;
    for (int64_t oy = 0; oy < g.oh; ++oy)
      for (int64_t ox = 0; ox < g.ow; ++ox) {
        const T* grad = dy + ((n * g.oh + oy) * g.ow + ox) * g.o;
        for_each_tap(g, n, oy, ox, [&](int64_t in_offset, int64_t tap) {
          if (dx) {
            T* d = dx + in_offset;
            const T* wk = wt.data() + tap * g.o;
            if (mult == 1)
              for (int64_t o = 0; o < g.o; ++o) d[o] += grad[o] * wk[o];
            else
              for (int64_t o = 0; o < g.o; ++o) d[o / mult] += grad[o] * wk[o];
          }
          if (dw_n) {
            const T* in = x + in_offset;
            T* acc = dw_n + tap * g.o;
            if (mult == 1)
              for (int64_t o = 0; o < g.o; ++o) acc[o] += grad[o] * in[o];
            else
              for (int64_t o = 0; o < g.o; ++o) acc[o] += grad[o] * in[o / mult];
          }
        });
      }
  }
  if (!dw) return;
  std::vector<T> total(static_cast<size_t>(taps * g.o), T(0));
  for (int64_t n = 0; n < g.n; ++n)
    for (int64_t i = 0; i < taps * g.o; ++i) total[static_cast<size_t>(i)] += partial[static_cast<size_t>(n * taps * g.o + i)];
  for (int64_t o = 0; o < g.o; ++o)  // back to [O, KH, KW]
    for (int64_t t = 0; t < taps; ++t) dw[o * taps + t] = total[static_cast<size_t>(t * g.o + o)];
}

// ---- im2col + GEMM path ----

std::atomic<int64_t> column_budget_bytes{int64_t(32) << 20};

// Samples per chunk: as many as fit the column buffer budget, at least one.
template <class T>
int64_t chunk_samples(const ConvGeometry& g) {
  const int64_t per_sample = g.oh * g.ow * g.kh * g.kw * g.group_in() * static_cast<int64_t>(sizeof(T));
  return std::clamp<int64_t>(column_budget_bytes.load() / std::max<int64_t>(per_sample, 1), 1, std::max<int64_t>(g.n, 1));
}

// The walk shared by the three GEMM paths: a column buffer for one chunk of samples, then
// body(n0, count, group, col) for every chunk and group, in order.
template <class T, class Body>
void for_each_chunk(const ConvGeometry& g, Body body) {
  const int64_t chunk = chunk_samples<T>(g);
  const int64_t columns = g.oh * g.ow * g.kh * g.kw * g.group_in();
  std::unique_ptr<T[]> col(new T[static_cast<size_t>(chunk * columns)]);  // no zero fill: im2col/GEMM write it all
  for (int64_t n0 = 0; n0 < g.n; n0 += chunk)
    for (int64_t group = 0; group < g.groups; ++group) body(n0, std::min(chunk, g.n - n0), group, col.get());
}

bool is_pointwise(const ConvGeometry& g) {
  return g.kh == 1 && g.kw == 1 && g.stride_h == 1 && g.stride_w == 1 && g.pad_h == 0 && g.pad_w == 0;
}

template <class T>
void gemm_forward(const ConvGeometry& g, const T* x, const T* w, T* y) {
  const int64_t og = g.group_out(), k = g.kh * g.kw * g.group_in(), pixels = g.oh * g.ow;
  if (is_pointwise(g)) {  // y[:, group] = x[:, group] w_group^T
    for (int64_t group = 0; group < g.groups; ++group)
      gemm(dtype_for<T>(), GemmShape{false, true, g.n * pixels, og, k, g.c, k, g.o}, 1.0, x + group * k,
           w + group * og * k, 0.0, y + group * og);
    return;
  }
  for_each_chunk<T>(g, [&](int64_t n0, int64_t count, int64_t group, T* col) {
    for (int64_t i = 0; i < count; ++i) im2col(g, x, n0 + i, group, col + i * pixels * k);
    GemmShape s{false, true, count * pixels, og, k, k, k, g.o};
    gemm(dtype_for<T>(), s, 1.0, col, w + group * og * k, 0.0, y + n0 * pixels * g.o + group * og);
  });
}

template <class T>
void gemm_backward_data(const ConvGeometry& g, const T* dy, const T* w, T* dx) {
  const int64_t og = g.group_out(), k = g.kh * g.kw * g.group_in(), pixels = g.oh * g.ow;
  if (is_pointwise(g)) {  // dx[:, group] = dy[:, group] w_group (every column written, so no fill)
    for (int64_t group = 0; group < g.groups; ++group)
      gemm(dtype_for<T>(), GemmShape{false, false, g.n * pixels, k, og, g.o, k, g.c}, 1.0, dy + group * og,
           w + group * og * k, 0.0, dx + group * k);
    return;
  }
  std::fill(dx, dx + g.n * g.h * g.w * g.c, T(0));
  for_each_chunk<T>(g, [&](int64_t n0, int64_t count, int64_t group, T* col) {
    GemmShape s{false, false, count * pixels, k, og, g.o, k, k};
    gemm(dtype_for<T>(), s, 1.0, dy + n0 * pixels * g.o + group * og, w + group * og * k, 0.0, col);
#pragma omp parallel for schedule(static) if (count > 1)
    for (int64_t i = 0; i < count; ++i) col2im_add(g, col + i * pixels * k, n0 + i, group, dx);
  });
}

template <class T>
void gemm_backward_filter(const ConvGeometry& g, const T* x, const T* dy, T* dw) {
  const int64_t og = g.group_out(), k = g.kh * g.kw * g.group_in(), pixels = g.oh * g.ow;
  if (is_pointwise(g)) {  // dw_group = dy[:, group]^T x[:, group]
    for (int64_t group = 0; group < g.groups; ++group)
      gemm(dtype_for<T>(), GemmShape{true, false, og, k, g.n * pixels, g.o, g.c, k}, 1.0, dy + group * og,
           x + group * k, 0.0, dw + group * og * k);
    return;
  }
  for_each_chunk<T>(g, [&](int64_t n0, int64_t count, int64_t group, T* col) {
    for (int64_t i = 0; i < count; ++i) im2col(g, x, n0 + i, group, col + i * pixels * k);
    GemmShape s{true, false, og, k, count * pixels, g.o, k, k};
    gemm(dtype_for<T>(), s, 1.0, dy + n0 * pixels * g.o + group * og, col, n0 == 0 ? 0.0 : 1.0, dw + group * og * k);
  });
}

// Widens 16-bit buffers to float, runs `body` on the float copies, and rounds `out` back.
template <class T, class Body>
void through_float(const void* a, int64_t na, const void* b, int64_t nb, void* out, int64_t nout, Body body) {
  auto widen = [](const void* p, int64_t n) {
    std::vector<float> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = to_compute(static_cast<const T*>(p)[i]);
    return v;
  };
  const std::vector<float> fa = widen(a, na), fb = widen(b, nb);
  std::vector<float> fout(static_cast<size_t>(nout));
  body(fa.data(), fb.data(), fout.data());
  for (int64_t i = 0; i < nout; ++i) static_cast<T*>(out)[i] = from_compute<T>(fout[static_cast<size_t>(i)]);
}

bool is_depthwise(const ConvGeometry& g) { return g.group_in() == 1 && g.groups > 1; }

// Runs op<C>(a, b, out) with C = float or double, widening 16-bit storage to float.
template <template <class> class Op>
void run_typed(DType dt, const char* name, const void* a, int64_t na, const void* b, int64_t nb, void* out, int64_t nout,
               const ConvGeometry& g) {
  dispatch_floating(dt, name, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
      Op<T>::run(g, static_cast<const T*>(a), static_cast<const T*>(b), static_cast<T*>(out));
    } else {
      through_float<T>(a, na, b, nb, out, nout, [&](const float* fa, const float* fb, float* fo) { Op<float>::run(g, fa, fb, fo); });
    }
  });
}

template <class T>
struct Forward {
  static void run(const ConvGeometry& g, const T* x, const T* w, T* y) {
    if (is_depthwise(g)) depthwise_forward(g, x, w, y);
    else gemm_forward(g, x, w, y);
  }
};
template <class T>
struct BackwardData {
  static void run(const ConvGeometry& g, const T* dy, const T* w, T* dx) {
    if (is_depthwise(g)) depthwise_backward<T>(g, nullptr, w, dy, dx, nullptr);
    else gemm_backward_data(g, dy, w, dx);
  }
};
template <class T>
struct BackwardFilter {
  static void run(const ConvGeometry& g, const T* x, const T* dy, T* dw) {
    if (is_depthwise(g)) depthwise_backward<T>(g, x, nullptr, dy, nullptr, dw);
    else gemm_backward_filter(g, x, dy, dw);
  }
};
}  // namespace

int64_t set_im2col_budget_bytes(int64_t bytes) { return column_budget_bytes.exchange(bytes); }

void conv2d_forward(DType dt, const ConvGeometry& g, const void* x, const void* weight, void* y, void* /*workspace*/,
                    size_t, ConvAlgoPolicy, void* /*cudnn_handle*/, Stream) {
  run_typed<Forward>(dt, "conv2d_forward", x, g.n * g.h * g.w * g.c, weight, g.o * g.kh * g.kw * g.group_in(), y,
                     g.n * g.oh * g.ow * g.o, g);
}

void conv2d_backward_data(DType dt, const ConvGeometry& g, const void* dy, const void* weight, void* dx,
                          void* /*workspace*/, size_t, ConvAlgoPolicy, void* /*cudnn_handle*/, Stream) {
  run_typed<BackwardData>(dt, "conv2d_backward_data", dy, g.n * g.oh * g.ow * g.o, weight,
                          g.o * g.kh * g.kw * g.group_in(), dx, g.n * g.h * g.w * g.c, g);
}

void conv2d_backward_filter(DType dt, const ConvGeometry& g, const void* x, const void* dy, void* dw,
                            void* /*workspace*/, size_t, ConvAlgoPolicy, void* /*cudnn_handle*/, Stream) {
  run_typed<BackwardFilter>(dt, "conv2d_backward_filter", x, g.n * g.h * g.w * g.c, dy, g.n * g.oh * g.ow * g.o, dw,
                            g.o * g.kh * g.kw * g.group_in(), g);
}

}  // namespace cnn::kernels::cpu
