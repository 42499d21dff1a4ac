// Loads and stores of one element of any dtype as double, for kernels that convert between types
// (cast, fill, random fill). Integers are exact up to 2^53. Floating results are rounded to float
// before f16/bf16 so that every backend rounds identically.
#pragma once
#include <cstdint>

#include "kernels/common/half.h"

namespace cnn {

CNN_HD double load_as_double(DType dt, const void* p, int64_t i) {
  switch (dt) {
    case DType::f32: return static_cast<const float*>(p)[i];
    case DType::f64: return static_cast<const double*>(p)[i];
    case DType::f16: return to_compute(static_cast<const half*>(p)[i]);
    case DType::bf16: return to_compute(static_cast<const bfloat16*>(p)[i]);
    case DType::i32: return static_cast<const int32_t*>(p)[i];
    case DType::i64: return static_cast<double>(static_cast<const int64_t*>(p)[i]);
    case DType::u8: return static_cast<const uint8_t*>(p)[i];
  }
  return 0;
}

CNN_HD void store_from_double(DType dt, void* p, int64_t i, double v) {
  switch (dt) {
    case DType::f32: static_cast<float*>(p)[i] = static_cast<float>(v); return;
    case DType::f64: static_cast<double*>(p)[i] = v; return;
    case DType::f16: static_cast<half*>(p)[i] = from_compute<half>(static_cast<float>(v)); return;
    case DType::bf16: static_cast<bfloat16*>(p)[i] = from_compute<bfloat16>(static_cast<float>(v)); return;
    case DType::i32: static_cast<int32_t*>(p)[i] = static_cast<int32_t>(v); return;
    case DType::i64: static_cast<int64_t*>(p)[i] = static_cast<int64_t>(v); return;
    case DType::u8: static_cast<uint8_t*>(p)[i] = static_cast<uint8_t>(v); return;
  }
}

// Copies element i between buffers of the same 64-bit integer type without going through double.
CNN_HD void copy_element(DType from, const void* x, DType to, void* y, int64_t i) {
  if (from == DType::i64 && to == DType::i64) {
    static_cast<int64_t*>(y)[i] = static_cast<const int64_t*>(x)[i];
    return;
  }
  store_from_double(to, y, i, load_as_double(from, x, i));
}

}  // namespace cnn
