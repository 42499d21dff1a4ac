// CPU reference for the elementwise kernels: plain loops over contiguous buffers, OpenMP over the
// elements, arithmetic in float (double for f64) through the shared element functions. Each loop
// is instantiated per op (with_constant_op), so that the element function's switch folds away and
// the loop is branch-free and vectorises.
#include "kernels/elementwise.h"

#include <type_traits>

#include "kernels/common/any_dtype.h"
#include "kernels/common/dispatch.h"
#include "kernels/common/half.h"

namespace cnn::kernels::cpu {

namespace {
// fn(op as a compile-time constant) for the op given at run time.
template <class Fn>
void with_constant_op(UnaryOp op, Fn fn) {
  switch (op) {
#define CNN_UNARY_CASE(name, domain) \
  case UnaryOp::name: return fn(std::integral_constant<UnaryOp, UnaryOp::name>{});
    CNN_UNARY_OPS(CNN_UNARY_CASE)
    CNN_UNARY_OPS_WITH_ARGUMENTS(CNN_UNARY_CASE)
#undef CNN_UNARY_CASE
  }
}

template <class Fn>
void with_constant_op(BinaryOp op, Fn fn) {
  switch (op) {
    case BinaryOp::add: return fn(std::integral_constant<BinaryOp, BinaryOp::add>{});
    case BinaryOp::sub: return fn(std::integral_constant<BinaryOp, BinaryOp::sub>{});
    case BinaryOp::mul: return fn(std::integral_constant<BinaryOp, BinaryOp::mul>{});
    case BinaryOp::div: return fn(std::integral_constant<BinaryOp, BinaryOp::div>{});
  }
}
}  // namespace

void unary_forward(UnaryOp op, DType dt, const void* x, void* y, int64_t n, double p0, double p1, Stream) {
  dispatch_floating(dt, "unary_forward", [&](auto tag) {
    using T = decltype(tag);
    using C = compute_t<T>;
    const T* xs = static_cast<const T*>(x);
    T* ys = static_cast<T*>(y);
    with_constant_op(op, [&](auto constant) {
#pragma omp parallel for schedule(static) if (n > 32768)
      for (int64_t i = 0; i < n; ++i)
        ys[i] = from_compute<T>(unary_forward_value<C>(constant.value, to_compute(xs[i]), C(p0), C(p1)));
    });
  });
}

void unary_backward(UnaryOp op, DType dt, const void* x, const void* gy, void* gx, int64_t n, double p0, Stream) {
  dispatch_floating(dt, "unary_backward", [&](auto tag) {
    using T = decltype(tag);
    using C = compute_t<T>;
    const T* xs = static_cast<const T*>(x);
    const T* gys = static_cast<const T*>(gy);
    T* gxs = static_cast<T*>(gx);
    with_constant_op(op, [&](auto constant) {
#pragma omp parallel for schedule(static) if (n > 32768)
      for (int64_t i = 0; i < n; ++i)
        gxs[i] = from_compute<T>(unary_backward_value<C>(constant.value, to_compute(xs[i]), to_compute(gys[i]), C(p0)));
    });
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
    with_constant_op(op, [&](auto constant) {
#pragma omp parallel for schedule(static) if (n > 32768)
      for (int64_t i = 0; i < n; ++i)
        ys[i] = from_compute<T>(binary_forward_value<C>(constant.value, to_compute(as[ia(i)]), to_compute(bs[ib(i)])));
    });
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


namespace {
// A cast between float and a 16-bit type as one typed loop: the same values as copy_element (a float
// goes through double and back unchanged, and the 16-bit types widen to float exactly), but
// vectorised instead of a switch on both dtypes per element (measured 20% of a bf16 ResNet-50
// forward, whose f32 weights are cast every call).
template <class From, class To>
void cast_loop(const void* x, void* y, int64_t n) {
  const From* xs = static_cast<const From*>(x);
  To* ys = static_cast<To*>(y);
#pragma omp parallel for schedule(static) if (n > 32768)
  for (int64_t i = 0; i < n; ++i) ys[i] = from_compute<To>(to_compute(xs[i]));
}
}  // namespace

void cast(DType from, const void* x, DType to, void* y, int64_t n, Stream) {
  if (from == DType::f32 && to == DType::bf16) return cast_loop<float, bfloat16>(x, y, n);
  if (from == DType::bf16 && to == DType::f32) return cast_loop<bfloat16, float>(x, y, n);
  if (from == DType::f32 && to == DType::f16) return cast_loop<float, half>(x, y, n);
  if (from == DType::f16 && to == DType::f32) return cast_loop<half, float>(x, y, n);
#pragma omp parallel for schedule(static) if (n > 32768)
  for (int64_t i = 0; i < n; ++i) copy_element(from, x, to, y, i);
}

void fill(DType dt, void* y, int64_t n, double value, Stream) {
#pragma omp parallel for schedule(static) if (n > 32768)
  for (int64_t i = 0; i < n; ++i) store_from_double(dt, y, i, value);
}

void increment_count(void* counter, Stream) { ++*static_cast<int64_t*>(counter); }

void random_fill(DType dt, void* y, int64_t n, RandomKind kind, uint64_t seed, uint64_t stream_id, double a,
                 double b, Stream) {
#pragma omp parallel for schedule(static) if (n > 4096)
  for (int64_t i = 0; i < n; ++i)
    store_from_double(dt, y, i, philox_element(kind, seed, stream_id, static_cast<uint64_t>(i), a, b));
}

}  // namespace cnn::kernels::cpu
