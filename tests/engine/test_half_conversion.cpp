// Exhaustive checks of the host conversions of kernels/common/half.h (the code the CPU backend and
// the host emulation of the CUDA kernels run; device code uses the hardware instructions, which
// round the same way):
//   - every one of the 65,536 half and 65,536 bf16 bit patterns converts to float and back to the
//     same bits, NaNs included (they stay NaN, keep sign and payload, and come back quiet);
//   - float -> half and float -> bf16 round to nearest, ties to even, on a dense set of floats: a
//     stride through all 2^32 patterns, every tie between two neighbouring 16-bit values and the
//     floats one ulp either side of it, the subnormals, and the overflow to infinity. The oracle is
//     independent of the code under test: the 16-bit values decoded with ldexp in double, and a
//     binary search for the nearest one;
//   - the CPU cast kernel's typed float <-> f16/bf16 loops give the generic conversion's bits.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "kernels/common/any_dtype.h"
#include "kernels/common/half.h"
#include "kernels/elementwise.h"

using namespace cnn;

namespace {

uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
float float_of(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// A 16-bit float format: exponent and mantissa widths.
struct Format {
  const char* name;
  int mantissa_bits;  // 10 (half), 7 (bf16)
  int exponent_bits;  // 5, 8
  std::function<uint16_t(float)> from_float;
  std::function<float(uint16_t)> to_float;

  int bias() const { return (1 << (exponent_bits - 1)) - 1; }
  uint16_t infinity_bits() const { return static_cast<uint16_t>(((1u << exponent_bits) - 1) << mantissa_bits); }
  // The value of a non-negative pattern as a double, from the format's definition. The infinity
  // pattern decodes as the power of two just past the largest finite value, which is what rounding
  // compares against (so 65520 = (65504 + 65536) / 2 is a tie that goes to the even pattern: inf).
  double value(uint16_t b) const {
    const int e = b >> mantissa_bits, m = b & ((1 << mantissa_bits) - 1);
    if (e == 0) return std::ldexp(static_cast<double>(m), 1 - bias() - mantissa_bits);
    return std::ldexp(static_cast<double>((1 << mantissa_bits) + m), e - bias() - mantissa_bits);
  }
  // Round-to-nearest-even of a finite float, by binary search over the ordered non-negative patterns.
  uint16_t nearest_even(float f) const {
    const double a = std::fabs(static_cast<double>(f));
    const uint16_t sign = std::signbit(f) ? 0x8000 : 0;
    uint32_t lo = 0, hi = infinity_bits();  // value(lo) <= a < value(hi), or a >= value(inf)
    if (a >= value(infinity_bits())) return static_cast<uint16_t>(sign | infinity_bits());
    while (hi - lo > 1) {
      const uint32_t mid = (lo + hi) / 2;
      (value(static_cast<uint16_t>(mid)) <= a ? lo : hi) = mid;
    }
    const double below = a - value(static_cast<uint16_t>(lo)), above = value(static_cast<uint16_t>(hi)) - a;
    const uint32_t pick = below < above ? lo : above < below ? hi : ((lo & 1u) == 0 ? lo : hi);
    return static_cast<uint16_t>(sign | pick);
  }
  bool is_nan_bits(uint16_t b) const {
    return (b & infinity_bits()) == infinity_bits() && (b & ((1u << mantissa_bits) - 1)) != 0;
  }
};

const Format kHalf{"f16", 10, 5, [](float f) { return float_to_half_bits(f); },
                   [](uint16_t b) { return half_bits_to_float(b); }};
const Format kBf16{"bf16", 7, 8, [](float f) { return float_to_bf16_bits(f); },
                   [](uint16_t b) { return bf16_bits_to_float(b); }};

// The dense set of floats: a prime stride through every pattern, and around every tie.
std::vector<float> dense_floats(const Format& fmt) {
  std::vector<float> out;
  for (uint64_t u = 0; u <= 0xffffffffull; u += 8191) out.push_back(float_of(static_cast<uint32_t>(u)));
  for (uint32_t b = 0; b < fmt.infinity_bits(); ++b) {
    // The tie between b and b + 1 is exact in float: the midpoint has one more mantissa bit.
    const double tie = (fmt.value(static_cast<uint16_t>(b)) + fmt.value(static_cast<uint16_t>(b + 1))) / 2;
    const float t = static_cast<float>(tie);
    REQUIRE(static_cast<double>(t) == tie);
    for (float v : {t, std::nextafter(t, 0.0f), std::nextafter(t, std::numeric_limits<float>::infinity()),
                    static_cast<float>(fmt.value(static_cast<uint16_t>(b)))}) {
      out.push_back(v);
      out.push_back(-v);
    }
  }
  for (float v : {0.0f, std::numeric_limits<float>::denorm_min(), std::numeric_limits<float>::min(),
                  std::numeric_limits<float>::max(), std::numeric_limits<float>::infinity()}) {
    out.push_back(v);
    out.push_back(-v);
  }
  return out;
}

}  // namespace

TEST_CASE("every f16 and bf16 bit pattern converts to float and back bit-identically, NaNs stay NaN") {
  for (const Format* fmt : {&kHalf, &kBf16}) {
    INFO(std::string(fmt->name));
    int mismatches = 0, nans = 0;
    for (uint32_t bits = 0; bits < 0x10000; ++bits) {
      const uint16_t b = static_cast<uint16_t>(bits);
      const float f = fmt->to_float(b);
      const uint16_t back = fmt->from_float(f);
      if (fmt->is_nan_bits(b)) {
        ++nans;
        CHECK(std::isnan(f));
        // Sign and payload kept; the quiet bit (the top mantissa bit) set.
        const uint16_t quiet = static_cast<uint16_t>(1u << (fmt->mantissa_bits - 1));
        if (back != (b | quiet)) ++mismatches;
        continue;
      }
      if (back != b) ++mismatches;
      const uint16_t magnitude = static_cast<uint16_t>(b & 0x7fff);
      const double want = magnitude == fmt->infinity_bits() ? std::numeric_limits<double>::infinity() : fmt->value(magnitude);
      if (static_cast<double>(f) != (b & 0x8000 ? -want : want)) ++mismatches;
    }
    CHECK(nans == 2 * ((1 << fmt->mantissa_bits) - 1));
    CHECK(mismatches == 0);
  }
}

TEST_CASE("float to f16 and bf16 rounds to nearest even: ties, subnormals, overflow to infinity") {
  for (const Format* fmt : {&kHalf, &kBf16}) {
    INFO(std::string(fmt->name));
    const std::vector<float> floats = dense_floats(*fmt);
    int64_t mismatches = 0, checked = 0;
    uint32_t first_bad = 0;
    for (float f : floats) {
      const uint16_t got = fmt->from_float(f);
      if (std::isnan(f)) {
        CHECK(fmt->is_nan_bits(got));
        continue;
      }
      ++checked;
      if (got != fmt->nearest_even(f)) {
        if (mismatches++ == 0) first_bad = bits_of(f);
      }
    }
    char first[16];
    std::snprintf(first, sizeof first, "0x%08x", first_bad);
    INFO("first mismatch at float bits " << std::string(first));
    CHECK(checked > 500000);
    CHECK(mismatches == 0);
  }
}

TEST_CASE("the CPU cast kernel's float <-> f16/bf16 loops give copy_element's bits on a dense set of floats") {
  // The typed loops of kernels/cpu/elementwise.cpp against the generic per-element conversion
  // (through double) that the other pairs and the CUDA kernel use: every 16-bit pattern widened and
  // its two f32 neighbours (the ties and either side of them), and a stride through all f32 patterns.
  std::vector<float> floats;
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    const auto b = static_cast<uint16_t>(bits);
    for (const float f : {kHalf.to_float(b), kBf16.to_float(b)}) {
      const uint32_t u = bits_of(f);
      for (const uint32_t v : {u, u + 1, u - 1, u + 0x1000, u + 0x8000}) {
        float g;
        std::memcpy(&g, &v, sizeof g);
        floats.push_back(g);
      }
    }
  }
  for (uint64_t bits = 0; bits < (uint64_t{1} << 32); bits += 65521) {
    const uint32_t u = static_cast<uint32_t>(bits);
    float g;
    std::memcpy(&g, &u, sizeof g);
    floats.push_back(g);
  }
  const int64_t n = static_cast<int64_t>(floats.size());
  for (DType narrow : {DType::f16, DType::bf16}) {
    INFO(dtype_name(narrow));
    std::vector<uint16_t> ours(floats.size()), generic(floats.size());
    kernels::cpu::cast(DType::f32, floats.data(), narrow, ours.data(), n);
    for (int64_t i = 0; i < n; ++i) copy_element(DType::f32, floats.data(), narrow, generic.data(), i);
    CHECK(std::memcmp(ours.data(), generic.data(), ours.size() * sizeof(uint16_t)) == 0);
    // And back: every pattern produced above, widened.
    std::vector<float> wide(floats.size()), wide_generic(floats.size());
    kernels::cpu::cast(narrow, ours.data(), DType::f32, wide.data(), n);
    for (int64_t i = 0; i < n; ++i) copy_element(narrow, ours.data(), DType::f32, wide_generic.data(), i);
    CHECK(std::memcmp(wide.data(), wide_generic.data(), wide.size() * sizeof(float)) == 0);
  }
}
