// Host conversions of f16 and bf16: round-to-nearest-even on edge values.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "engine/cnn.h"

using namespace cnn;

namespace {
uint16_t h(float f) { return float_to_half_bits(f); }
float hf(uint16_t b) { return half_bits_to_float(b); }
uint16_t b16(float f) { return float_to_bf16_bits(f); }
}  // namespace

TEST_CASE("f16 conversion of ordinary and extreme values") {
  CHECK(h(0.0f) == 0x0000);
  CHECK(h(-0.0f) == 0x8000);
  CHECK(h(1.0f) == 0x3c00);
  CHECK(h(-2.0f) == 0xc000);
  CHECK(h(65504.0f) == 0x7bff);              // largest finite half
  CHECK(h(65519.0f) == 0x7bff);              // below the midpoint to 65536: stays finite
  CHECK(h(65520.0f) == 0x7c00);              // the midpoint rounds to even, which is infinity
  CHECK(h(std::numeric_limits<float>::infinity()) == 0x7c00);
  CHECK(h(-std::numeric_limits<float>::infinity()) == 0xfc00);
  CHECK(std::isnan(hf(h(std::nanf("")))));
  CHECK((h(std::nanf("")) & 0x7c00) == 0x7c00);
  CHECK(hf(0x7bff) == 65504.0f);
  CHECK(std::isinf(hf(0x7c00)));
}

TEST_CASE("f16 subnormals and ties round to nearest even") {
  const float min_sub = std::ldexp(1.0f, -24);
  CHECK(h(min_sub) == 0x0001);
  CHECK(hf(0x0001) == min_sub);
  CHECK(h(std::ldexp(1.0f, -25)) == 0x0000);          // exactly half of the smallest: tie to even (0)
  CHECK(h(std::ldexp(1.5f, -25)) == 0x0001);          // above the tie: rounds up
  CHECK(h(std::ldexp(3.0f, -25)) == 0x0002);          // 1.5 ulp: tie between 1 and 2, even is 2
  CHECK(h(std::ldexp(1.0f, -14)) == 0x0400);          // smallest normal
  CHECK(hf(0x03ff) == std::ldexp(1023.0f, -24));      // largest subnormal
  // 1 + 2^-11 is halfway between 1 and 1 + 2^-10: ties to the even mantissa (1.0).
  CHECK(h(1.0f + std::ldexp(1.0f, -11)) == 0x3c00);
  // 1 + 3 * 2^-11 is halfway between 1 + 2^-10 (odd) and 1 + 2^-9 (even): rounds up.
  CHECK(h(1.0f + 3 * std::ldexp(1.0f, -11)) == 0x3c02);
  CHECK(h(1.0f + std::ldexp(1.0f, -11) + std::ldexp(1.0f, -20)) == 0x3c01);  // just above a tie
}

TEST_CASE("f16 round trip of every finite half value is exact") {
  int mismatches = 0;
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    const uint16_t b = static_cast<uint16_t>(bits);
    if ((b & 0x7c00) == 0x7c00) continue;  // inf and nan
    if (h(hf(b)) != b) ++mismatches;
  }
  CHECK(mismatches == 0);
}

TEST_CASE("bf16 conversion: rounding, infinities, nan, max") {
  CHECK(b16(1.0f) == 0x3f80);
  CHECK(b16(-0.0f) == 0x8000);
  CHECK(bf16_bits_to_float(0x3f80) == 1.0f);
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to even (1.0); 1 + 3*2^-8 ties up to 1 + 2^-6.
  CHECK(b16(1.0f + std::ldexp(1.0f, -8)) == 0x3f80);
  CHECK(b16(1.0f + 3 * std::ldexp(1.0f, -8)) == 0x3f82);
  CHECK(b16(std::numeric_limits<float>::infinity()) == 0x7f80);
  CHECK(std::isnan(bf16_bits_to_float(b16(std::nanf("")))));
  CHECK(b16(std::numeric_limits<float>::max()) == 0x7f80);  // rounds past the largest bf16
  CHECK(bf16_bits_to_float(0x7f7f) == std::ldexp(255.0f / 128.0f, 127));  // largest finite bf16
  CHECK(b16(std::ldexp(1.0f, -133)) == 0x0001);             // float subnormals stay subnormal
}

TEST_CASE("dtype names parse and print") {
  CHECK(parse_dtype("fp16") == DType::f16);
  CHECK(parse_dtype("bfloat16") == DType::bf16);
  CHECK(std::string(dtype_name(DType::i64)) == "i64");
  CHECK_THROWS_WITH_AS(parse_dtype("float8"), doctest::Contains("unknown dtype 'float8'"), Error);
  CHECK(dtype_size(DType::bf16) == 2);
}
