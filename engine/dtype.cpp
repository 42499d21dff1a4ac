#include "engine/dtype.h"

#include "engine/error.h"

namespace cnn {

DType parse_dtype(const std::string& text) {
  if (text == "f32" || text == "float32" || text == "fp32" || text == "float") return DType::f32;
  if (text == "f64" || text == "float64" || text == "fp64" || text == "double") return DType::f64;
  if (text == "f16" || text == "float16" || text == "fp16" || text == "half") return DType::f16;
  if (text == "bf16" || text == "bfloat16") return DType::bf16;
  if (text == "i32" || text == "int32") return DType::i32;
  if (text == "i64" || text == "int64") return DType::i64;
  if (text == "u8" || text == "uint8") return DType::u8;
  throw Error("unknown dtype '" + text + "': use one of f32, f64, f16, bf16, i32, i64, u8");
}

}  // namespace cnn
