// The BatchNorm + ReLU + max-pool forward on the CPU (kernels/batch_norm_pool.h): the max-pool loop
// of kernels/cpu/pool_loops.h over rows computed by the BatchNorm row of kernels/cpu/batch_norm_rows.h
// (into a per-thread buffer of one pixel), so that every value is the one the two separate kernels
// make.
//
// Traffic over an [N, H, W, C] input of s-byte elements pooled 2x2: x read once, a quarter of its
// size written (plus the argmax); the two separate kernels also write y and read it back, about 2.6x
// the bytes. The backward passes gather each pixel's gradient from the pooled one (pool_loops.h's
// gather) into a row buffer for the BatchNorm rows: per pass x plus the pooled gradient and argmax
// (1.5x x's bytes) where max_pool2d_backward then batch_norm_backward_reduce/input move 7.5x in all.
#include "kernels/batch_norm_pool.h"

#include <type_traits>
#include <vector>

#include "kernels/common/dispatch.h"
#include "kernels/cpu/batch_norm_rows.h"
#include "kernels/cpu/pool_loops.h"

namespace cnn::kernels::cpu {

using namespace batch_norm_rows;
using namespace pool_loops;

namespace {
constexpr BatchNormActivation kRelu = BatchNormActivation::relu;

// The gradient of relu(BatchNorm(x)) at x's pixels, gathered from the pooled gradient dy and argmax,
// row by row as max_pool2d_backward writes it (summed in the compute type, stored as T).
template <class T>
class GatheredRows {
 public:
  using C = compute_t<T>;
  GatheredRows(const PoolGeometry& g, const void* dy, const int32_t* argmax)
      : g_(g), covering_(g), dy_(static_cast<const T*>(dy)), argmax_(argmax) {}

  // Writes the rows of pixels first .. first + count - 1 (flat (n * H + iy) * W + ix) to out
  // [count, C]; sum is room for C values of the caller's thread.
  void rows(int64_t first, int64_t count, T* __restrict out, C* __restrict sum) const {
    int64_t ix = first % g_.w, iy = (first / g_.w) % g_.h, n = first / (g_.w * g_.h);
    for (int64_t k = 0; k < count; ++k) {
      row(n, iy, ix, out + k * g_.c, sum);
      if (++ix == g_.w) {
        ix = 0;
        if (++iy == g_.h) iy = 0, ++n;
      }
    }
  }

  void row(int64_t n, int64_t iy, int64_t ix, T* __restrict out, C* __restrict sum) const {
    const int64_t oy = covering_.oy0[iy], ox = covering_.ox0[ix];
    if (covering_.oy1[iy] - oy == 1 && covering_.ox1[ix] - ox == 1) {
      // One window covers the pixel (the usual case; the op's windows do not overlap): the gather's
      // sum with one term, 0 + (the gradient where the argmax points here, else 0), without its loop.
      const int64_t at = ((n * g_.oh + oy) * g_.ow + ox) * g_.c;
      const int32_t* __restrict where = argmax_ + at;
      const T* __restrict grad = dy_ + at;
      const int32_t pos = static_cast<int32_t>(iy * g_.w + ix);
      for (int64_t c = 0; c < g_.c; ++c)
        out[c] = from_compute<T>(C(0) + (where[c] == pos ? to_compute(grad[c]) : C(0)));
      return;
    }
    if constexpr (std::is_same_v<T, C>) {
      pool_loops::max_pool_input_gradient<T, C>(g_, covering_, dy_, argmax_, n, iy, ix, out);
    } else {
      pool_loops::max_pool_input_gradient<T, C>(g_, covering_, dy_, argmax_, n, iy, ix, sum);
      for (int64_t c = 0; c < g_.c; ++c) out[c] = from_compute<T>(sum[c]);
    }
  }

 private:
  const PoolGeometry& g_;
  const CoveringOutputs covering_;
  const T* dy_;
  const int32_t* argmax_;
};

// Room for `count` values of T (and as many of its compute type) per thread, kept between calls.
template <class T>
struct RowBuffers {
  std::vector<T> rows;
  std::vector<compute_t<T>> sum;
  static RowBuffers& of_this_thread(int64_t count) {
    thread_local RowBuffers buffers;
    if (buffers.rows.size() < static_cast<size_t>(count)) {
      buffers.rows.resize(static_cast<size_t>(count));
      buffers.sum.resize(static_cast<size_t>(count));
    }
    return buffers;
  }
};
}  // namespace

void batch_norm_relu_max_pool_forward(DType dt, const PoolGeometry& g, const void* x, const void* mean,
                                      const void* invstd, const void* weight, const void* bias, void* y,
                                      int32_t* argmax, Stream) {
  dispatch_floating(dt, "batch_norm_relu_max_pool_forward", [&](auto tag) {
    using T = decltype(tag);
    using A = compute_t<T>;
    const ChannelParameters<A> p(mean, invstd, weight, bias, g.c);
    const T* xs = static_cast<const T*>(x);
    // Each input pixel's y as the separate BatchNorm forward stores it.
    const auto row_of = [&](int64_t pixel, T* buffer) {
      forward_row<kRelu, T>(xs + pixel * g.c, nullptr, g.c, p, buffer);
      return static_cast<const T*>(buffer);
    };
    max_pool_forward<T, A>(g, row_of, static_cast<T*>(y), argmax);
  });
}

void batch_norm_relu_max_pool_backward_reduce(DType dt, const PoolGeometry& g, const void* dy, const int32_t* argmax,
                                              const void* x, const void* mean, const void* invstd, const void* weight,
                                              const void* bias, void* sum_dz, void* sum_dz_xhat, Stream) {
  mask_for(kRelu, nullptr, dt, "batch_norm_relu_max_pool_backward_reduce");  // f32 and f64 only
  dispatch_floating(dt, "batch_norm_relu_max_pool_backward_reduce", [&](auto tag) {
    using T = decltype(tag);
    using A = compute_t<T>;
    const ChannelParameters<A> p(mean, invstd, weight, bias, g.c);
    const GatheredRows<T> gathered(g, dy, argmax);
    const T* xs = static_cast<const T*>(x);
    // The row blocks and groups of batch_norm_backward_reduce, over rows gathered a group at a time.
    const std::vector<double> sums = channel_sums<2>(g.n * g.h * g.w, g.c, [&](int64_t r, int64_t n, double* acc) {
      RowBuffers<T>& buffers = RowBuffers<T>::of_this_thread(kRowGroup * g.c);
      gathered.rows(r, n, buffers.rows.data(), buffers.sum.data());
      backward_reduce_rows<T, Mask::from_input>(buffers.rows.data(), nullptr, xs + r * g.c, n, g.c, p, acc, acc + g.c);
    });
    store_sums(sums, g.c, static_cast<A*>(sum_dz), static_cast<A*>(sum_dz_xhat));
  });
}

void batch_norm_relu_max_pool_backward_input(DType dt, const PoolGeometry& g, const void* dy, const int32_t* argmax,
                                             const void* x, const void* mean, const void* invstd, const void* weight,
                                             const void* bias, const void* sum_dz, const void* sum_dz_xhat,
                                             bool training, void* dx, Stream) {
  mask_for(kRelu, nullptr, dt, "batch_norm_relu_max_pool_backward_input");  // f32 and f64 only
  dispatch_floating(dt, "batch_norm_relu_max_pool_backward_input", [&](auto tag) {
    using T = decltype(tag);
    using A = compute_t<T>;
    const ChannelParameters<A> p(mean, invstd, weight, bias, g.c);
    const InputGradientTerms<A> terms(p, sum_dz, sum_dz_xhat, g.c, g.n * g.h * g.w);
    const GatheredRows<T> gathered(g, dy, argmax);
    const T* xs = static_cast<const T*>(x);
    T* dxs = static_cast<T*>(dx);
    with_training(training, [&](auto training_constant) {
      const auto make_scratch = [&] { return RowBuffers<T>{std::vector<T>(g.c), std::vector<A>(g.c)}; };
      parallel_pixels(g.n, g.h, g.w, make_scratch, [&](RowBuffers<T>& row, int64_t n, int64_t iy, int64_t ix) {
        const int64_t at = ((n * g.h + iy) * g.w + ix) * g.c;
        gathered.row(n, iy, ix, row.rows.data(), row.sum.data());
        backward_input_row<T, Mask::from_input, decltype(training_constant)::value>(row.rows.data(), nullptr, xs + at,
                                                                                     g.c, terms, dxs + at, nullptr);
      });
    });
  });
}

}  // namespace cnn::kernels::cpu
