// 16-byte vector loads and stores of a few adjacent elements, converted to and from the compute
// type: 8 halves or bfloat16s, 4 floats, 2 doubles per instruction (ld.global.v4 / st.global.v4),
// or one element when V == 1 (the fallback for a channel count or an address that does not allow
// vectors). Under the host emulation the same code is a 16-byte struct copy.
#pragma once
#include <cstdint>

#include "kernels/common/half.h"
#include "kernels/cuda/launch.cuh"

namespace cnn::kernels::cuda {

// Elements per 16-byte vector.
template <class T>
constexpr int kVectorWidth = static_cast<int>(16 / sizeof(T));

template <class T, int V>
struct alignas(sizeof(T) * V) Vector {
  T v[V];
};

template <int V, class T>
__device__ __forceinline__ void load_vector(const T* p, compute_t<T> (&out)[V]) {
  const Vector<T, V> vec = *reinterpret_cast<const Vector<T, V>*>(p);
#pragma unroll
  for (int k = 0; k < V; ++k) out[k] = to_compute(vec.v[k]);
}

// The same, or `fallback` in every element when p is null (an optional operand).
template <int V, class T>
__device__ __forceinline__ void load_vector_or(const T* p, compute_t<T> fallback, compute_t<T> (&out)[V]) {
  if (p) {
    load_vector<V>(p, out);
  } else {
#pragma unroll
    for (int k = 0; k < V; ++k) out[k] = fallback;
  }
}

template <int V, class T>
__device__ __forceinline__ void store_vector(T* p, const compute_t<T> (&in)[V]) {
  Vector<T, V> vec;
#pragma unroll
  for (int k = 0; k < V; ++k) vec.v[k] = from_compute<T>(in[k]);
  *reinterpret_cast<Vector<T, V>*>(p) = vec;
}

// Whether p (null counts as aligned) may be accessed in 16-byte vectors.
inline bool vector_aligned(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

}  // namespace cnn::kernels::cuda
