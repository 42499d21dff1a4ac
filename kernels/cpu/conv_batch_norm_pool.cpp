// The inference kernel of conv2d -> BatchNorm -> ReLU -> max pool for few input channels
// (kernels/conv_batch_norm_pool.h): each pooled output computed from its window's pixels, each pixel
// convolved, normalised and clamped in vector registers, so that the convolution's output is never
// stored.
//
// - The input is first copied with its zero padding around each image, so that every tap of every
//   pixel lies inside it: the tap loop is one flat list of offsets, with no bounds tests.
// - The output channels go in blocks of one vector register (GCC's vector extension: 16 f32 or 8 f64
//   with AVX-512), two blocks at a time, for four window pixels at a time (a 2x2 window), so that
//   each tap's weights are loaded once for four pixels and each input value once for two blocks:
//   eight sums in registers. The weights are reordered to [KH, KW, C, O] (O padded to whole blocks)
//   so that a tap's weights for a block are contiguous.
// - Each sum runs over the taps in (kh, kw, c) order, then adds the convolution's bias; the
//   normalisation and the maximum are batch_norm_math.h's and max_math.h's rules, written for
//   vectors where they need a select.
#include "kernels/conv_batch_norm_pool.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/common/batch_norm_math.h"
#include "kernels/common/error.h"
#include "kernels/common/pool_math.h"

namespace cnn::kernels::cpu {

namespace {
// One vector register of T, as wide as the build's instruction set allows (a portable build's
// SSE2 registers hold 16 bytes).
#if defined(__AVX512F__)
constexpr int kVectorBytes = 64;
#elif defined(__AVX__)
constexpr int kVectorBytes = 32;
#else
constexpr int kVectorBytes = 16;
#endif
template <class T>
struct VectorOf;
template <>
struct VectorOf<float> {
  typedef float type __attribute__((vector_size(kVectorBytes)));
};
template <>
struct VectorOf<double> {
  typedef double type __attribute__((vector_size(kVectorBytes)));
};

template <class T>
class ConvNormPool {
 public:
  using Vector = typename VectorOf<T>::type;
  static constexpr int64_t kBlock = static_cast<int64_t>(sizeof(Vector) / sizeof(T));
  static constexpr int kPixels = 4;  // window pixels at once (a group is padded with repeats of its last)
  static constexpr int kBlocks = 2;  // channel blocks at once

  ConvNormPool(const ConvGeometry& g, const PoolGeometry& pool, const T* x, const T* weight, const T* bias,
               const void* mean, const void* invstd, const void* bn_weight, const void* bn_bias)
      : g_(g),
        pool_(pool),
        hp_(g.h + 2 * g.pad_h),
        wp_(g.w + 2 * g.pad_w),
        op_((g.o + kBlocks * kBlock - 1) / (kBlocks * kBlock) * (kBlocks * kBlock)) {
    pad_input(x);
    const int64_t taps = g.kh * g.kw * g.c;
    weights_.assign(static_cast<size_t>(taps * op_), T(0));
    for (int64_t o = 0; o < g.o; ++o)
      for (int64_t tap = 0; tap < taps; ++tap) weights_[tap * op_ + o] = weight[o * taps + tap];
    for (int64_t ky = 0; ky < g.kh; ++ky)
      for (int64_t kx = 0; kx < g.kw; ++kx)
        for (int64_t c = 0; c < g.c; ++c)
          tap_offsets_.push_back((ky * g.dilation_h * wp_ + kx * g.dilation_w) * g.c + c);
    bias_ = channel_array(bias, T(0));
    mean_ = channel_array(static_cast<const T*>(mean), T(0));
    invstd_ = channel_array(static_cast<const T*>(invstd), T(1));
    scale_ = channel_array(static_cast<const T*>(bn_weight), T(1));
    shift_ = channel_array(static_cast<const T*>(bn_bias), T(0));
  }

  // The pooled output (n, py, px), all channels, into y.
  void output(int64_t n, int64_t py, int64_t px, T* __restrict y) const {
    const PoolWindow win = pool_window(pool_, py, px);
    for (int64_t o = 0; o < op_; o += kBlocks * kBlock) {
      Vector best[kBlocks];
      for (Vector& b : best) b = broadcast(-std::numeric_limits<T>::infinity());
      const T* pixels[kPixels];
      int count = 0;
      for (int64_t cy = win.h0; cy < win.h1; ++cy)
        for (int64_t cx = win.w0; cx < win.w1; ++cx) {
          pixels[count++] = padded_.data() + ((n * hp_ + cy * g_.stride_h) * wp_ + cx * g_.stride_w) * g_.c;
          if (count == kPixels) {
            pool_pixels(pixels, o, best);
            count = 0;
          }
        }
      if (count > 0) {
        for (int k = count; k < kPixels; ++k) pixels[k] = pixels[count - 1];
        pool_pixels(pixels, o, best);
      }
      const int64_t valid = std::min<int64_t>(kBlocks * kBlock, g_.o - o);
      if (valid == kBlocks * kBlock)
        std::memcpy(y + o, best, sizeof(best));
      else if (valid > 0)
        std::memcpy(y + o, best, static_cast<size_t>(valid) * sizeof(T));
    }
  }

 private:
  // Four pixels' convolution (first inputs at `pixels`) for the channels o .. o + kBlocks * kBlock - 1,
  // normalised, clamped and pooled into best.
  void pool_pixels(const T* const* pixels, int64_t o, Vector* best) const {
    Vector acc[kBlocks][kPixels] = {};
    const T* w = weights_.data() + o;
    for (const int64_t offset : tap_offsets_) {
      Vector wv[kBlocks];
      for (int b = 0; b < kBlocks; ++b) wv[b] = load(w + b * kBlock);
      for (int k = 0; k < kPixels; ++k) {
        const T v = pixels[k][offset];
        for (int b = 0; b < kBlocks; ++b) acc[b][k] += v * wv[b];
      }
      w += op_;
    }
    for (int b = 0; b < kBlocks; ++b) {
      const int64_t ob = o + b * kBlock;
      const Vector bias = load(bias_.data() + ob), mean = load(mean_.data() + ob), invstd = load(invstd_.data() + ob),
                   scale = load(scale_.data() + ob), shift = load(shift_.data() + ob);
      for (int k = 0; k < kPixels; ++k) {
        Vector z = batch_norm_affine<Vector>(batch_norm_xhat<Vector>(acc[b][k] + bias, mean, invstd), scale, shift);
        z = z < Vector{} ? Vector{} : z;  // the relu of batch_norm_output
        // max_replaces (max_math.h): larger, or a NaN over a number.
        best[b] = (z > best[b]) | ((z != z) & (best[b] == best[b])) ? z : best[b];
      }
    }
  }

  // x with each image's zero padding, [N, H + 2 pad_h, W + 2 pad_w, C].
  void pad_input(const T* x) {
    padded_.assign(static_cast<size_t>(g_.n * hp_ * wp_ * g_.c), T(0));
    const int64_t row = g_.w * g_.c;
#pragma omp parallel for collapse(2) schedule(static)
    for (int64_t n = 0; n < g_.n; ++n)
      for (int64_t iy = 0; iy < g_.h; ++iy)
        std::memcpy(padded_.data() + ((n * hp_ + iy + g_.pad_h) * wp_ + g_.pad_w) * g_.c, x + (n * g_.h + iy) * row,
                    static_cast<size_t>(row) * sizeof(T));
  }

  // A per-channel array padded to op_ channels (`fallback` where p is null, and in the padding).
  std::vector<T> channel_array(const T* p, T fallback) const {
    std::vector<T> v(static_cast<size_t>(op_), fallback);
    if (p != nullptr) std::copy(p, p + g_.o, v.begin());
    return v;
  }

  static Vector load(const T* p) {
    Vector v;
    std::memcpy(&v, p, sizeof(v));
    return v;
  }
  static Vector broadcast(T value) {
    Vector v;
    for (int64_t k = 0; k < kBlock; ++k) v[k] = value;
    return v;
  }

  const ConvGeometry& g_;
  const PoolGeometry& pool_;
  const int64_t hp_, wp_;  // the padded input's height and width
  const int64_t op_;       // the output channels rounded up to whole groups of blocks
  std::vector<T> padded_, weights_;
  std::vector<int64_t> tap_offsets_;  // of each tap (ky, kx, c) from its pixel's first input
  std::vector<T> bias_, mean_, invstd_, scale_, shift_;
};
}  // namespace

void conv_batch_norm_relu_max_pool_forward(DType dt, const ConvGeometry& conv, const PoolGeometry& pool, const void* x,
                                           const void* weight, const void* conv_bias, const void* mean,
                                           const void* invstd, const void* bn_weight, const void* bn_bias, void* y,
                                           Stream) {
  CNN_CHECK(dt == DType::f32 || dt == DType::f64, "conv_batch_norm_relu_max_pool_forward: f32 or f64 only, got ",
            dtype_name(dt));
  CNN_CHECK(conv.groups == 1 && conv.c <= kConvPoolMaxInputChannels && pool.n == conv.n && pool.h == conv.oh &&
                pool.w == conv.ow && pool.c == conv.o && pool.stride_h >= pool.kh && pool.stride_w >= pool.kw &&
                !pool.adaptive,
            "conv_batch_norm_relu_max_pool_forward: needs groups 1, at most ", kConvPoolMaxInputChannels,
            " input channels and disjoint pooling windows over the convolution's output");
  const auto run = [&](auto tag) {
    using T = decltype(tag);
    const ConvNormPool<T> stage(conv, pool, static_cast<const T*>(x), static_cast<const T*>(weight),
                                static_cast<const T*>(conv_bias), mean, invstd, bn_weight, bn_bias);
    T* ys = static_cast<T*>(y);
#pragma omp parallel for collapse(2) schedule(static)
    for (int64_t n = 0; n < pool.n; ++n)
      for (int64_t py = 0; py < pool.oh; ++py)
        for (int64_t px = 0; px < pool.ow; ++px)
          stage.output(n, py, px, ys + ((n * pool.oh + py) * pool.ow + px) * conv.o);
  };
  if (dt == DType::f64)
    run(double{});
  else
    run(float{});
}

}  // namespace cnn::kernels::cpu
