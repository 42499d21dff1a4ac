// Helpers shared by the emulated-kernel tests: typed host buffers poisoned with NaN, random fills,
// and a comparison with a per-dtype tolerance that reports the first differing element.
#pragma once
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "kernels/elementwise.h"

namespace cnn::testing {

namespace cpu = cnn::kernels::cpu;

// Whether two vectors hold the same bytes (NaNs compare by their bits). memcmp of an empty vector's
// data() would pass a null pointer, which is undefined even for zero bytes (UBSan reports it).
template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}

struct Buffer {
  DType dt;
  int64_t n;
  std::vector<uint8_t> bytes;
  Buffer(DType d, int64_t count) : dt(d), n(count), bytes(static_cast<size_t>(count * dtype_size(d)) + 1) {
    if (is_floating(d)) cpu::fill(d, data(), n, std::numeric_limits<double>::quiet_NaN());
  }
  void* data() { return bytes.data(); }
  const void* data() const { return bytes.data(); }
  std::vector<double> values() const {
    std::vector<double> out(static_cast<size_t>(n));
    cpu::cast(dt, data(), DType::f64, out.data(), n);
    return out;
  }
};

inline Buffer random_buffer(DType dt, int64_t n, uint64_t seed, double low = -2.0, double high = 2.0) {
  Buffer b(dt, n);
  cpu::random_fill(dt, b.data(), n, RandomKind::uniform, seed, 1, low, high);
  return b;
}

// Relative tolerance per dtype: f16/bf16 results may differ by one rounding step.
inline double tolerance(DType dt) {
  switch (dt) {
    case DType::f16: return 2e-3;
    case DType::bf16: return 1.6e-2;
    case DType::f64: return 1e-12;
    default: return 2e-6;
  }
}

// `sum_terms`: how many terms each compared value sums (reductions add in different orders).
inline void expect_close(const Buffer& got, const Buffer& want, const std::string& what, int64_t sum_terms = 1) {
  REQUIRE(got.n == want.n);
  const std::vector<double> g = got.values(), w = want.values();
  const double tol = tolerance(got.dt) * std::sqrt(static_cast<double>(sum_terms));
  int64_t bad = 0, first_bad = -1;
  for (size_t i = 0; i < g.size(); ++i) {
    const bool close = std::fabs(g[i] - w[i]) <= tol * (1.0 + std::fabs(w[i]));  // NaN is never close
    if (!close) {
      if (first_bad < 0) first_bad = static_cast<int64_t>(i);
      ++bad;
    }
  }
  INFO(what << " (" << dtype_name(got.dt) << "): " << bad << " of " << g.size() << " elements differ; first at "
            << first_bad << ": emulated " << (first_bad >= 0 ? g[first_bad] : 0) << " vs cpu "
            << (first_bad >= 0 ? w[first_bad] : 0));
  CHECK(bad == 0);
}

inline const DType kFloatTypes[] = {DType::f32, DType::f64, DType::f16, DType::bf16};

// The public ops of engine/ops.h whose CUDA kernels each emulated test runs: op -> tests.
// test_emulated_coverage.cpp checks that every public op has one (or a stated reason why not).
inline std::map<std::string, std::set<std::string>>& emulated_ops() {
  static std::map<std::string, std::set<std::string>> ops;
  return ops;
}
inline void add_ops(std::vector<std::string>& to, const char* op) { to.push_back(op); }
inline void add_ops(std::vector<std::string>& to, const std::set<std::string>& ops) {
  to.insert(to.end(), ops.begin(), ops.end());
}
template <class... Ops>
bool register_emulated_ops(const char* test, const Ops&... ops) {
  std::vector<std::string> all;
  (add_ops(all, ops), ...);
  for (const std::string& op : all) emulated_ops()[op].insert(test);
  return true;
}

}  // namespace cnn::testing

// A doctest TEST_CASE that runs the CUDA kernels of the listed public ops (names, or sets of names).
#define CNN_EMULATED_TEST_CASE(name, ...)                                                      \
  [[maybe_unused]] static const bool DOCTEST_ANONYMOUS(cnn_emulated_ops_) =                  \
      ::cnn::testing::register_emulated_ops(name, __VA_ARGS__);                                \
  TEST_CASE(name)
