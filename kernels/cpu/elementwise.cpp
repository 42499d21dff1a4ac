// CPU reference for the elementwise kernels: plain loops over contiguous buffers, OpenMP over the
// elements, arithmetic in float (double for f64) through the shared element functions.
#include "kernels/elementwise.h"

#include "kernels/common/any_dtype.h"
#include "kernels/common/dispatch.h"
#include "kernels/common/half.h"

namespace cnn::kernels::cpu {

void unary_forward(UnaryOp op, DType dt, const void* x, void* y, int64_t n, double p0, double p1, Stream) {
  dispatch_floating(dt, "unary_forward", [&](auto tag) {
    using T = decltype(tag);
    using C = compute_t<T>;
    const T* xs = static_cast<const T*>(x);
    T* ys = static_cast<T*>(y);
#pragma omp parallel for schedule(static) if (n > 32768)
    for (int64_t i = 0; i < n; ++i) ys[i] = from_compute<T>(unary_forward_value<C>(op, to_compute(xs[i]), C(p0), C(p1)));
  });
}

void unary_backward(UnaryOp op, DType dt, const void* x, const void* gy, void* gx, int64_t n, double p0, Stream) {
  dispatch_floating(dt, "unary_backward", [&](auto tag) {
    using T = decltype(tag);
    using C = compute_t<T>;
    const T* xs = static_cast<const T*>(x);
    const T* gys = static_cast<const T*>(gy);
    T* gxs = static_cast<T*>(gx);
#pragma omp parallel for schedule(static) if (n > 32768)
    for (int64_t i = 0; i < n; ++i)
      gxs[i] = from_compute<T>(unary_backward_value<C>(op, to_compute(xs[i]), to_compute(gys[i]), C(p0)));
  });
}

void binary_forward(BinaryOp op, DType dt, const void* a, BroadcastIndex ia, const void* b, BroadcastIndex ib,
                    void* y, int64_t n, Stream) {
  dispatch_floating(dt, "binary_forward", [&](auto tag) {
    using T = decltype(tag);
    using C = compute_t<T>;
    const T* as = static_cast<const T*>(a);
    const T* bs = static_cast<const T*>(b);
    T* ys = static_cast<T*>(y);
#pragma omp parallel for schedule(static) if (n > 32768)
    for (int64_t i = 0; i < n; ++i)
      ys[i] = from_compute<T>(binary_forward_value<C>(op, to_compute(as[ia(i)]), to_compute(bs[ib(i)])));
  });
}

void binary_backward(BinaryOp op, DType dt, const void* a, BroadcastIndex ia, const void* b, BroadcastIndex ib,
                     const void* gy, void* ga, void* gb, int64_t n, Stream) {
  dispatch_floating(dt, "binary_backward", [&](auto tag) {
    using T = decltype(tag);
    using C = compute_t<T>;
    const T* as = static_cast<const T*>(a);
    const T* bs = static_cast<const T*>(b);
    const T* gys = static_cast<const T*>(gy);
    T* gas = static_cast<T*>(ga);
    T* gbs = static_cast<T*>(gb);
#pragma omp parallel for schedule(static) if (n > 32768)
    for (int64_t i = 0; i < n; ++i) {
      C da = 0, db = 0;
      binary_backward_values<C>(op, to_compute(as[ia(i)]), to_compute(bs[ib(i)]), to_compute(gys[i]), da, db);
      if (gas) gas[i] = from_compute<T>(da);
      if (gbs) gbs[i] = from_compute<T>(db);
    }
  });
}


void cast(DType from, const void* x, DType to, void* y, int64_t n, Stream) {
#pragma omp parallel for schedule(static) if (n > 32768)
  for (int64_t i = 0; i < n; ++i) copy_element(from, x, to, y, i);
}

void fill(DType dt, void* y, int64_t n, double value, Stream) {
#pragma omp parallel for schedule(static) if (n > 32768)
  for (int64_t i = 0; i < n; ++i) store_from_double(dt, y, i, value);
}

void random_fill(DType dt, void* y, int64_t n, RandomKind kind, uint64_t seed, uint64_t stream_id, double a,
                 double b, Stream) {
#pragma omp parallel for schedule(static) if (n > 4096)
  for (int64_t i = 0; i < n; ++i)
    store_from_double(dt, y, i, philox_element(kind, seed, stream_id, static_cast<uint64_t>(i), a, b));
}

}  // namespace cnn::kernels::cpu
