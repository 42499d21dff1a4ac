// The BatchNorm + ReLU + max-pool forward on the CPU (kernels/batch_norm_pool.h): the max-pool loop
// of kernels/cpu/pool_loops.h over rows computed by the BatchNorm row of kernels/cpu/batch_norm_rows.h
// (into a per-thread buffer of one pixel), so that every value is the one the two separate kernels
// make.
//
// Traffic over an [N, H, W, C] input of s-byte elements pooled 2x2: x read once, a quarter of its
// size written (plus the argmax); the two separate kernels also write y and read it back, about 2.6x
// the bytes.
#include "kernels/batch_norm_pool.h"

#include "kernels/common/dispatch.h"
#include "kernels/cpu/batch_norm_rows.h"
#include "kernels/cpu/pool_loops.h"

namespace cnn::kernels::cpu {

using namespace batch_norm_rows;
using namespace pool_loops;

namespace {
constexpr BatchNormActivation kRelu = BatchNormActivation::relu;
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

}  // namespace cnn::kernels::cpu
