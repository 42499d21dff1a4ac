// bf16 GEMMs through oneDNN's matmul (kernels/cpu/gemm_onednn.cpp) against the widening path's
// arithmetic (the bf16 operands widened to float, OpenBLAS's sgemm, one rounding to bf16): every
// transpose, leading dimensions wider than the rows, beta 0 (the old C never read) and 1 (added),
// and the shapes of compact_cnn's Linear layers; and the calls it declines.
#include <doctest/doctest.h>

#include "engine/config.h"

#if CNN_WITH_ONEDNN
#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "engine/cnn.h"
#include "kernels/common/half.h"
#include "kernels/cpu/gemm_onednn.h"
#include "kernels/gemm.h"

using namespace cnn;
using kernels::GemmShape;

namespace {

std::vector<bfloat16> random_bf16(size_t count, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<bfloat16> v(count);
  for (bfloat16& x : v) x = from_compute<bfloat16>(u(rng));
  return v;
}

std::vector<float> widened(const std::vector<bfloat16>& v) {
  std::vector<float> f(v.size());
  std::transform(v.begin(), v.end(), f.begin(), [](bfloat16 b) { return to_compute(b); });
  return f;
}

// Elements an operand of `rows` rows with leading dimension ld spans.
size_t extent(int64_t rows, int64_t cols, int64_t ld) { return static_cast<size_t>((rows - 1) * ld + cols); }

struct Outcome {
  bool ran = false;
  double onednn = 0, widening = 0, scale = 0;  // largest differences from the exact result, and its size
};

Outcome run(const GemmShape& s, double beta, uint32_t seed) {
  const std::vector<bfloat16> a = random_bf16(extent(s.trans_a ? s.k : s.m, s.trans_a ? s.m : s.k, s.lda), seed),
                              b = random_bf16(extent(s.trans_b ? s.n : s.k, s.trans_b ? s.k : s.n, s.ldb), seed + 1),
                              c0 = random_bf16(extent(s.m, s.n, s.ldc), seed + 2);
  // The widening path's arithmetic, and the exact result in double, from the same bf16 values.
  std::vector<float> fc = widened(c0);
  const std::vector<float> fa = widened(a), fb = widened(b);
  kernels::cpu::gemm(DType::f32, s, 1.0, fa.data(), fb.data(), beta, fc.data());
  std::vector<bfloat16> c = c0;
  if (beta == 0)  // never read: NaN bits that must not come through
    for (bfloat16& x : c) x = from_compute<bfloat16>(std::numeric_limits<float>::quiet_NaN());
  Outcome o;
  o.ran = kernels::cpu::onednn_gemm(DType::bf16, s, 1.0, a.data(), b.data(), beta, c.data());
  const auto at = [](const std::vector<bfloat16>& v, int64_t r, int64_t col, int64_t ld, bool transposed) {
    return static_cast<double>(to_compute(v[static_cast<size_t>(transposed ? col * ld + r : r * ld + col)]));
  };
  for (int64_t i = 0; i < s.m; ++i)
    for (int64_t j = 0; j < s.n; ++j) {
      double exact = beta * at(c0, i, j, s.ldc, false);
      for (int64_t p = 0; p < s.k; ++p) exact += at(a, i, p, s.lda, s.trans_a) * at(b, p, j, s.ldb, s.trans_b);
      const size_t e = static_cast<size_t>(i * s.ldc + j);
      const double ours = to_compute(c[e]), widening = to_compute(from_compute<bfloat16>(fc[e]));
      o.onednn = std::isnan(ours) ? std::numeric_limits<double>::infinity() : std::max(o.onednn, std::abs(ours - exact));
      o.widening = std::max(o.widening, std::abs(widening - exact));
      o.scale = std::max(o.scale, std::abs(exact));
    }
  return o;
}

}  // namespace

TEST_CASE("oneDNN bf16 GEMM: every transpose, wide leading dimensions, beta 0 and 1, as the widening path rounds") {
  struct Case {
    const char* name;
    GemmShape s;
  };
  const Case cases[] = {
      {"A B", {false, false, 5, 7, 9, 9, 7, 7}},
      {"A^T B", {true, false, 6, 8, 11, 6, 8, 8}},
      {"A B^T (a Linear forward)", {false, true, 13, 10, 33, 33, 33, 10}},
      {"A^T B^T", {true, true, 4, 9, 17, 4, 17, 9}},
      {"leading dimensions wider than the rows", {false, false, 7, 5, 12, 20, 9, 16}},
      {"compact_cnn's first Linear, forward: 256 x 3136 -> 128", {false, true, 256, 128, 3136, 3136, 3136, 128}},
      {"its weight gradient: dy^T x", {true, false, 128, 3136, 256, 128, 3136, 3136}},
      {"its input gradient: dy W", {false, false, 256, 3136, 128, 128, 3136, 3136}},
  };
  uint32_t seed = 10;
  int ran = 0;
  for (const Case& c : cases)
    for (double beta : {0.0, 1.0}) {
      CAPTURE(c.name);
      CAPTURE(beta);
      const Outcome o = run(c.s, beta, seed += 3);
      if (!o.ran) continue;  // declined (a CPU without bf16 code in oneDNN): the widening path runs
      ++ran;
      // Both sum exact products in f32 and round once; they part only where the two summation orders'
      // f32 sums round to neighbouring bf16 values.
      CHECK(o.onednn <= std::max(2 * o.widening, std::ldexp(1.0, -8) * o.scale));
    }
  MESSAGE("oneDNN ran ", ran, " of the 16 bf16 products");
}

TEST_CASE("oneDNN bf16 GEMM: other dtypes, alpha and beta are declined and C left as it was") {
  const GemmShape s{false, false, 3, 4, 5, 5, 4, 4};
  const std::vector<bfloat16> a = random_bf16(15, 1), b = random_bf16(20, 2);
  const std::vector<bfloat16> before = random_bf16(12, 3);
  std::vector<bfloat16> c = before;
  CHECK_FALSE(kernels::cpu::onednn_gemm(DType::f16, s, 1.0, a.data(), b.data(), 0.0, c.data()));
  CHECK_FALSE(kernels::cpu::onednn_gemm(DType::bf16, s, 2.0, a.data(), b.data(), 0.0, c.data()));
  CHECK_FALSE(kernels::cpu::onednn_gemm(DType::bf16, s, 1.0, a.data(), b.data(), 0.5, c.data()));
  for (size_t i = 0; i < c.size(); ++i) CHECK(c[i].bits == before[i].bits);
}
#endif
