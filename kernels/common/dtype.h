// Element types known to every layer of the engine, and the 16-bit float storage types.
// Lives in kernels/ (the bottom layer) so that kernels and the engine share one definition.
#pragma once
#include <cstdint>

namespace cnn {

enum class DType : uint8_t { f32, f64, f16, bf16, i32, i64, u8 };

constexpr int dtype_size(DType t) {
  switch (t) {
    case DType::f32: return 4;
    case DType::f64: return 8;
    case DType::f16: return 2;
    case DType::bf16: return 2;
    case DType::i32: return 4;
    case DType::i64: return 8;
    case DType::u8: return 1;
  }
  return 0;
}

constexpr const char* dtype_name(DType t) {
  switch (t) {
    case DType::f32: return "f32";
    case DType::f64: return "f64";
    case DType::f16: return "f16";
    case DType::bf16: return "bf16";
    case DType::i32: return "i32";
    case DType::i64: return "i64";
    case DType::u8: return "u8";
  }
  return "?";
}

constexpr bool is_floating(DType t) {
  return t == DType::f32 || t == DType::f64 || t == DType::f16 || t == DType::bf16;
}

// The type that sums, statistics and losses of a floating dtype are kept in.
constexpr DType accumulate_dtype(DType t) { return t == DType::f64 ? DType::f64 : DType::f32; }

// IEEE binary16 and bfloat16 as plain 16-bit storage; arithmetic happens in float (see half.h).
struct half {
  uint16_t bits;
};
struct bfloat16 {
  uint16_t bits;
};

}  // namespace cnn
