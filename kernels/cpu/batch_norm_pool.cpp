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
// row by row as max_pool2d_backward writes it (T is f32 or f64, its own compute type).
template <class T>
class GatheredRows {
 public:
  GatheredRows(const PoolGeometry& g, const void* dy, const int32_t* argmax)
      : g_(g), covering_(g), dy_(static_cast<const T*>(dy)), argmax_(argmax) {}

  // Writes the rows of pixels first .. first + count - 1 (flat (n * H + iy) * W + ix) to out [count, C].
  void rows(int64_t first, int64_t count, T* __restrict out) const {
    int64_t ix = first % g_.w, iy = (first / g_.w) % g_.h, n = first / (g_.w * g_.h);
    for (int64_t k = 0; k < count; ++k) {
      row(n, iy, ix, out + k * g_.c);
      if (++ix == g_.w) {
        ix = 0;
        if (++iy == g_.h) iy = 0, ++n;
      }
    }
  }

  void row(int64_t n, int64_t iy, int64_t ix, T* __restrict out) const {
    max_pool_input_gradient<T, T>(g_, covering_, dy_, argmax_, n, iy, ix, out);
  }

 private:
  const PoolGeometry& g_;
  const CoveringOutputs covering_;
  const T* dy_;
  const int32_t* argmax_;
};

// f(float{}) or f(double{}): the backward kernels take the relu mask from x, which needs f32 or f64
// (mask_for refuses the others with its message).
template <class F>
void dispatch_mask_from_input(DType dt, const char* kernel, F&& f) {
  mask_for(kRelu, nullptr, dt, kernel);
  if (dt == DType::f64)
    f(double{});
  else
    f(float{});
}
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
  dispatch_mask_from_input(dt, "batch_norm_relu_max_pool_backward_reduce", [&](auto tag) {
    using T = decltype(tag);
    using A = compute_t<T>;
    const ChannelParameters<A> p(mean, invstd, weight, bias, g.c);
    const GatheredRows<T> gathered(g, dy, argmax);
    const T* xs = static_cast<const T*>(x);
    // The row blocks and groups of batch_norm_backward_reduce, over rows gathered a group at a time.
    const std::vector<double> sums = channel_sums<2>(g.n * g.h * g.w, g.c, [&](int64_t r, int64_t n, double* acc) {
      thread_local std::vector<T> buffer;  // a group of gathered rows, kept between calls
      buffer.resize(static_cast<size_t>(kRowGroup * g.c));
      gathered.rows(r, n, buffer.data());
      backward_reduce_rows<T, Mask::from_input>(buffer.data(), nullptr, xs + r * g.c, n, g.c, p, acc, acc + g.c);
    });
    store_sums(sums, g.c, static_cast<A*>(sum_dz), static_cast<A*>(sum_dz_xhat));
  });
}

void batch_norm_relu_max_pool_backward_input(DType dt, const PoolGeometry& g, const void* dy, const int32_t* argmax,
                                             const void* x, const void* mean, const void* invstd, const void* weight,
                                             const void* bias, const void* sum_dz, const void* sum_dz_xhat,
                                             bool training, void* dx, Stream) {
  dispatch_mask_from_input(dt, "batch_norm_relu_max_pool_backward_input", [&](auto tag) {
    using T = decltype(tag);
    using A = compute_t<T>;
    const ChannelParameters<A> p(mean, invstd, weight, bias, g.c);
    const InputGradientTerms<A> terms(p, sum_dz, sum_dz_xhat, g.c, g.n * g.h * g.w);
    const GatheredRows<T> gathered(g, dy, argmax);
    const T* xs = static_cast<const T*>(x);
    T* dxs = static_cast<T*>(dx);
    with_training(training, [&](auto training_constant) {
      const auto make_scratch = [&] { return std::vector<T>(static_cast<size_t>(g.c)); };
      parallel_pixels(g.n, g.h, g.w, make_scratch, [&](std::vector<T>& row, int64_t n, int64_t iy, int64_t ix) {
        const int64_t at = ((n * g.h + iy) * g.w + ix) * g.c;
        gathered.row(n, iy, ix, row.data());
        backward_input_row<T, Mask::from_input, decltype(training_constant)::value>(row.data(), nullptr, xs + at, g.c,
                                                                                     terms, dxs + at, nullptr);
      });
    });
  });
}

}  // namespace cnn::kernels::cpu
