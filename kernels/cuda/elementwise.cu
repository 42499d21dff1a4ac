// Elementwise CUDA kernels: unary ops and their derivatives, binary ops with the [outer, mid, inner]
// broadcast of elementwise_math.h, cast, fill and Philox random fill.
// How: one grid-stride loop per kernel, one element per thread per step, arithmetic in float (double
// for f64) through the element functions shared with the CPU reference. The op is a runtime
// argument rather than a template parameter: the switch is uniform across a warp, the kernels are
// bound by memory traffic, and it keeps the number of instantiations (and the build time) small.
// Memory traffic: unary forward reads n and writes n elements; backward reads 2n, writes n;
// binary reads up to 2n (less for a broadcast operand, which stays in cache) and writes n.
#include "kernels/common/any_dtype.h"
#include "kernels/common/dispatch.h"
#include "kernels/common/half.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/elementwise.h"

namespace cnn::kernels::cuda {

namespace {
constexpr int kThreads = kBlockThreads;

template <class T>
__global__ void unary_forward_kernel(UnaryOp op, const T* x, T* y, int64_t n, compute_t<T> p0, compute_t<T> p1) {
  for (int64_t i = CNN_GLOBAL_INDEX; i < n; i += CNN_GRID_STRIDE)
    y[i] = from_compute<T>(unary_forward_value(op, to_compute(x[i]), p0, p1));
}

template <class T>
__global__ void unary_backward_kernel(UnaryOp op, const T* x, const T* gy, T* gx, int64_t n, compute_t<T> p0) {
  for (int64_t i = CNN_GLOBAL_INDEX; i < n; i += CNN_GRID_STRIDE)
    gx[i] = from_compute<T>(unary_backward_value(op, to_compute(x[i]), to_compute(gy[i]), p0));
}

template <class T>
__global__ void binary_forward_kernel(BinaryOp op, const T* a, BroadcastIndex ia, const T* b, BroadcastIndex ib,
                                      T* y, int64_t n) {
  for (int64_t i = CNN_GLOBAL_INDEX; i < n; i += CNN_GRID_STRIDE)
    y[i] = from_compute<T>(binary_forward_value(op, to_compute(a[ia(i)]), to_compute(b[ib(i)])));
}

template <class T>
__global__ void binary_backward_kernel(BinaryOp op, const T* a, BroadcastIndex ia, const T* b, BroadcastIndex ib,
                                       const T* gy, T* ga, T* gb, int64_t n) {
  for (int64_t i = CNN_GLOBAL_INDEX; i < n; i += CNN_GRID_STRIDE) {
    compute_t<T> da = 0, db = 0;
    binary_backward_values(op, to_compute(a[ia(i)]), to_compute(b[ib(i)]), to_compute(gy[i]), da, db);
    if (ga) ga[i] = from_compute<T>(da);
    if (gb) gb[i] = from_compute<T>(db);
  }
}

__global__ void cast_kernel(DType from, const void* x, DType to, void* y, int64_t n) {
  for (int64_t i = CNN_GLOBAL_INDEX; i < n; i += CNN_GRID_STRIDE) copy_element(from, x, to, y, i);
}

__global__ void fill_kernel(DType dt, void* y, int64_t n, double value) {
  for (int64_t i = CNN_GLOBAL_INDEX; i < n; i += CNN_GRID_STRIDE) store_from_double(dt, y, i, value);
}

__global__ void random_fill_kernel(DType dt, void* y, int64_t n, RandomKind kind, uint64_t seed, uint64_t stream_id,
                                   double a, double b) {
  for (int64_t i = CNN_GLOBAL_INDEX; i < n; i += CNN_GRID_STRIDE)
    store_from_double(dt, y, i, philox_element(kind, seed, stream_id, static_cast<uint64_t>(i), a, b));
}
__global__ void increment_count_kernel(int64_t* counter) {
  if (CNN_GLOBAL_INDEX == 0) ++*counter;
}
}  // namespace

void unary_forward(UnaryOp op, DType dt, const void* x, void* y, int64_t n, double p0, double p1, Stream stream) {
  if (n == 0) return;
  dispatch_floating(dt, "unary_forward", [&](auto tag) {
    using T = decltype(tag);
    using C = compute_t<T>;
    CNN_LAUNCH(unary_forward_kernel<T>, grid_for(n, kThreads), kThreads, stream, op, static_cast<const T*>(x),
               static_cast<T*>(y), n, C(p0), C(p1));
  });
}

void unary_backward(UnaryOp op, DType dt, const void* x, const void* gy, void* gx, int64_t n, double p0,
                    Stream stream) {
  if (n == 0) return;
  dispatch_floating(dt, "unary_backward", [&](auto tag) {
    using T = decltype(tag);
    CNN_LAUNCH(unary_backward_kernel<T>, grid_for(n, kThreads), kThreads, stream, op, static_cast<const T*>(x),
               static_cast<const T*>(gy), static_cast<T*>(gx), n, compute_t<T>(p0));
  });
}

void binary_forward(BinaryOp op, DType dt, const void* a, BroadcastIndex ia, const void* b, BroadcastIndex ib,
                    void* y, int64_t n, Stream stream) {
  if (n == 0) return;
  dispatch_floating(dt, "binary_forward", [&](auto tag) {
    using T = decltype(tag);
    CNN_LAUNCH(binary_forward_kernel<T>, grid_for(n, kThreads), kThreads, stream, op, static_cast<const T*>(a), ia,
               static_cast<const T*>(b), ib, static_cast<T*>(y), n);
  });
}

void binary_backward(BinaryOp op, DType dt, const void* a, BroadcastIndex ia, const void* b, BroadcastIndex ib,
                     const void* gy, void* ga, void* gb, int64_t n, Stream stream) {
  if (n == 0) return;
  dispatch_floating(dt, "binary_backward", [&](auto tag) {
    using T = decltype(tag);
    CNN_LAUNCH(binary_backward_kernel<T>, grid_for(n, kThreads), kThreads, stream, op, static_cast<const T*>(a), ia,
               static_cast<const T*>(b), ib, static_cast<const T*>(gy), static_cast<T*>(ga), static_cast<T*>(gb), n);
  });
}

void cast(DType from, const void* x, DType to, void* y, int64_t n, Stream stream) {
  if (n == 0) return;
  CNN_LAUNCH(cast_kernel, grid_for(n, kThreads), kThreads, stream, from, x, to, y, n);
}

void fill(DType dt, void* y, int64_t n, double value, Stream stream) {
  if (n == 0) return;
  CNN_LAUNCH(fill_kernel, grid_for(n, kThreads), kThreads, stream, dt, y, n, value);
}

void random_fill(DType dt, void* y, int64_t n, RandomKind kind, uint64_t seed, uint64_t stream_id, double a, double b,
                 Stream stream) {
  if (n == 0) return;
  CNN_LAUNCH(random_fill_kernel, grid_for(n, kThreads), kThreads, stream, dt, y, n, kind, seed, stream_id, a, b);
}

void increment_count(void* counter, Stream stream) {
  CNN_LAUNCH(increment_count_kernel, 1, 1, stream, static_cast<int64_t*>(counter));
}

}  // namespace cnn::kernels::cuda
