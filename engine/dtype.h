// Element types (defined in kernels/common/dtype.h, shared with the kernels) and their host helpers.
#pragma once
#include <string>

#include "kernels/common/dtype.h"
#include "kernels/common/half.h"

namespace cnn {

// "f32", "float32", "fp32", "float", ... to a DType; anything else is a cnn::Error.
DType parse_dtype(const std::string& text);

// The C++ type that stores a dtype, for typed access to tensor data.
template <class T>
constexpr DType dtype_of();
template <> constexpr DType dtype_of<float>() { return DType::f32; }
template <> constexpr DType dtype_of<double>() { return DType::f64; }
template <> constexpr DType dtype_of<half>() { return DType::f16; }
template <> constexpr DType dtype_of<bfloat16>() { return DType::bf16; }
template <> constexpr DType dtype_of<int32_t>() { return DType::i32; }
template <> constexpr DType dtype_of<int64_t>() { return DType::i64; }
template <> constexpr DType dtype_of<uint8_t>() { return DType::u8; }

}  // namespace cnn
