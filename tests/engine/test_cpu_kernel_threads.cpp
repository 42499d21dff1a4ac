// The CPU kernels whose work is shared among threads give the same bits on any number of threads
// (the BatchNorm sums, in f32 and bf16, the loss-scale pass's sum of squares, the multi-tensor
// optimizer step), and the column sums keep their documented order along the summed axis.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "engine/cnn.h"
#include "kernels/batch_norm.h"
#include "kernels/common/half.h"
#include "kernels/loss_scale.h"
#include "kernels/optimizer.h"
#include "kernels/reduce.h"

using namespace cnn;
namespace k = cnn::kernels;

namespace {

std::vector<float> random_values(size_t count, uint32_t seed, float low = -1, float high = 1) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(low, high);
  std::vector<float> v(count);
  for (float& x : v) x = u(rng);
  return v;
}

// Runs fn once per thread count (1, 2, 3) and returns what each run produced.
template <class Fn>
auto per_thread_count(Fn fn) {
  const int before = cpu_threads();
  std::vector<decltype(fn())> results;
  for (int threads : {1, 2, 3}) {
    set_cpu_threads(threads);
    results.push_back(fn());
  }
  set_cpu_threads(before);
  return results;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// The BatchNorm statistics and backward sums (no activation) of x and dy [m, c] in dtype dt, on 1,
// 2 and 3 threads, checked to have the same bits on each; returns the 1-thread run's mean, var,
// sum_dz and sum_dz_xhat (the latter with every invstd given).
std::vector<std::vector<float>> batch_norm_sums_on_any_thread_count(DType dt, const void* x, const void* dy, int64_t m,
                                                                    int64_t c, float invstd) {
  const auto runs = per_thread_count([&] {
    std::vector<float> mean(c), var(c), sum_dz(c), sum_dz_xhat(c), inv(c, invstd);
    k::cpu::batch_norm_stats(dt, x, m, c, mean.data(), var.data());
    k::cpu::batch_norm_backward_reduce(dt, dy, nullptr, x, m, c, mean.data(), inv.data(), nullptr, nullptr,
                                       BatchNormActivation::none, sum_dz.data(), sum_dz_xhat.data());
    return std::vector<std::vector<float>>{mean, var, sum_dz, sum_dz_xhat};
  });
  for (size_t part = 0; part < 4; ++part) {
    CAPTURE(part);
    CHECK(same_bits(runs[0][part], runs[1][part]));
    CHECK(same_bits(runs[0][part], runs[2][part]));
  }
  return runs[0];
}

}  // namespace

TEST_CASE("BatchNorm statistics and backward sums: the same bits on 1, 2 and 3 threads, and close to the exact sums") {
  // 40000 rows: many row blocks, and a count that no thread count divides evenly.
  const int64_t m = 40000, c = 24;
  const std::vector<float> x = random_values(static_cast<size_t>(m * c), 1, 2, 3), dy = random_values(static_cast<size_t>(m * c), 2);
  const std::vector<std::vector<float>> sums = batch_norm_sums_on_any_thread_count(DType::f32, x.data(), dy.data(), m, c, 1.5f);
  for (int64_t ch = 0; ch < c; ++ch) {
    double sum = 0, sq = 0, sdz = 0;
    for (int64_t r = 0; r < m; ++r) sum += x[static_cast<size_t>(r * c + ch)];
    const double mean = sum / m;
    for (int64_t r = 0; r < m; ++r) {
      const double d = x[static_cast<size_t>(r * c + ch)] - mean;
      sq += d * d;
      sdz += dy[static_cast<size_t>(r * c + ch)];
    }
    CHECK(sums[0][static_cast<size_t>(ch)] == doctest::Approx(mean).epsilon(1e-6));
    CHECK(sums[1][static_cast<size_t>(ch)] == doctest::Approx(sq / m).epsilon(1e-6));
    CHECK(sums[2][static_cast<size_t>(ch)] == doctest::Approx(sdz).epsilon(1e-5));
  }
}

TEST_CASE("BatchNorm sums of bf16 activations: the same bits on 1, 2 and 3 threads, and within 1e-6 of the exact sums") {
  // The 16-bit types add each group of four rows' terms in float before the double sums
  // (batch_norm_rows.h's kGroupInFloat): measured against sums in double of the same bf16 values,
  // with a mean far from zero (1000 + [-4, 4]) so that a lost shift would show.
  const int64_t m = 40000, c = 24;
  const auto to_bf16 = [](const std::vector<float>& v) {
    std::vector<bfloat16> b(v.size());
    for (size_t i = 0; i < v.size(); ++i) b[i] = from_compute<bfloat16>(v[i]);
    return b;
  };
  const std::vector<bfloat16> x = to_bf16(random_values(static_cast<size_t>(m * c), 3, 996, 1004)),
                              dy = to_bf16(random_values(static_cast<size_t>(m * c), 4));
  const float invstd = 0.5f;
  const std::vector<std::vector<float>> sums = batch_norm_sums_on_any_thread_count(DType::bf16, x.data(), dy.data(), m, c, invstd);
  const auto value = [](bfloat16 b) { return static_cast<double>(to_compute(b)); };
  for (int64_t ch = 0; ch < c; ++ch) {
    CAPTURE(ch);
    const auto at = [&](int64_t r) { return static_cast<size_t>(r * c + ch); };
    double sum = 0, sq = 0, sdz = 0, sdz_abs = 0, sdzx = 0, sdzx_abs = 0;
    for (int64_t r = 0; r < m; ++r) sum += value(x[at(r)]);
    const double mean = sum / m, kernel_mean = sums[0][static_cast<size_t>(ch)];
    for (int64_t r = 0; r < m; ++r) {
      const double d = value(x[at(r)]) - mean, g = value(dy[at(r)]);
      const double xhat = (value(x[at(r)]) - kernel_mean) * invstd;  // as the kernel normalises
      sq += d * d;
      sdz += g;
      sdz_abs += std::abs(g);
      sdzx += g * xhat;
      sdzx_abs += std::abs(g * xhat);
    }
    CHECK(kernel_mean == doctest::Approx(mean).epsilon(1e-7));
    CHECK(sums[1][static_cast<size_t>(ch)] == doctest::Approx(sq / m).epsilon(1e-6));
    CHECK(std::abs(sums[2][static_cast<size_t>(ch)] - sdz) <= 1e-6 * sdz_abs);
    CHECK(std::abs(sums[3][static_cast<size_t>(ch)] - sdzx) <= 1e-6 * sdzx_abs);
  }
}

TEST_CASE("the loss-scale pass: the same sum of squares on 1, 2 and 3 threads, non-finite elements counted") {
  // Many tensors of uneven sizes, several larger than a chunk, so that chunks straddle thread shares.
  std::vector<std::vector<float>> grads;
  for (int t = 0; t < 9; ++t) grads.push_back(random_values(static_cast<size_t>(1000 + t * 23011), 10 + t));
  grads[4][77] = std::numeric_limits<float>::infinity();
  grads[7][5] = std::numeric_limits<float>::quiet_NaN();
  const auto runs = per_thread_count([&] {
    std::vector<std::vector<float>> copies = grads;  // unscaled in place
    std::vector<k::MultiTensorSlot> slots;
    int64_t start = 0;
    for (auto& g : copies) {
      k::MultiTensorSlot s;
      s.grad = g.data();
      s.numel = static_cast<int64_t>(g.size());
      s.start = start;
      start += s.numel;
      slots.push_back(s);
    }
    float result[2] = {0, 0};
    k::cpu::unscale_and_check(slots.data(), static_cast<int>(slots.size()), start, DType::f32, 0.5f, nullptr, nullptr, result);
    return std::vector<float>{result[0], result[1], copies[8][1234]};
  });
  CHECK(same_bits(runs[0], runs[1]));
  CHECK(same_bits(runs[0], runs[2]));
  CHECK(runs[0][1] == 2);  // the inf and the NaN
  CHECK(runs[0][2] == grads[8][1234] * 0.5f);
  double exact = 0;
  for (const auto& g : grads)
    for (float v : g)
      if (std::isfinite(v)) exact += 0.25 * static_cast<double>(v) * v;
  CHECK(runs[0][0] == doctest::Approx(exact).epsilon(1e-6));
}

TEST_CASE("the multi-tensor SGD step: every element of every tensor updated, the same bits on 1, 2 and 3 threads") {
  const std::vector<size_t> sizes = {1, 7, 40000, 32768, 100003, 5};
  const auto runs = per_thread_count([&] {
    std::vector<std::vector<float>> params, grads, momenta;
    std::vector<k::MultiTensorSlot> slots;
    int64_t start = 0;
    for (size_t t = 0; t < sizes.size(); ++t) {
      params.push_back(random_values(sizes[t], static_cast<uint32_t>(100 + t)));
      grads.push_back(random_values(sizes[t], static_cast<uint32_t>(200 + t)));
      momenta.push_back(random_values(sizes[t], static_cast<uint32_t>(300 + t)));
    }
    for (size_t t = 0; t < sizes.size(); ++t) {
      k::MultiTensorSlot s;
      s.param = params[t].data();
      s.grad = grads[t].data();
      s.state1 = momenta[t].data();
      s.numel = static_cast<int64_t>(sizes[t]);
      s.start = start;
      start += s.numel;
      slots.push_back(s);
    }
    k::SgdArgs args;
    args.lr = 0.1f;
    args.momentum = 0.9f;
    args.weight_decay = 1e-4f;
    k::cpu::optimizer_step(slots.data(), static_cast<int>(slots.size()), start, args);
    std::vector<float> all;
    for (const auto& p : params) all.insert(all.end(), p.begin(), p.end());
    return all;
  });
  CHECK(same_bits(runs[0], runs[1]));
  CHECK(same_bits(runs[0], runs[2]));
  // Each element as torch.optim.SGD computes it: g = grad + wd p; buf = momentum buf + g; p -= lr buf.
  size_t offset = 0;
  for (size_t t = 0; t < sizes.size(); ++t) {
    const std::vector<float> p = random_values(sizes[t], static_cast<uint32_t>(100 + t)),
                             g = random_values(sizes[t], static_cast<uint32_t>(200 + t)),
                             b = random_values(sizes[t], static_cast<uint32_t>(300 + t));
    for (size_t i = 0; i < sizes[t]; i += std::max<size_t>(1, sizes[t] / 97)) {
      const float buf = 0.9f * b[i] + (g[i] + 1e-4f * p[i]);
      CHECK(runs[0][offset + i] == doctest::Approx(p[i] - 0.1f * buf).epsilon(1e-6));
    }
    offset += sizes[t];
  }
}

TEST_CASE("column sums: each column summed in order along the middle axis, for widths that are no multiple of a tile") {
  for (const auto& [outer, mid, inner] : {std::tuple<int64_t, int64_t, int64_t>{1, 5000, 37}, {3, 700, 16}, {2, 900, 1}, {1, 3, 70}}) {
    const std::vector<float> x = random_values(static_cast<size_t>(outer * mid * inner), 5);
    std::vector<float> y(static_cast<size_t>(outer * inner), -1.f);
    k::cpu::reduce_middle_sum(DType::f32, x.data(), y.data(), outer, mid, inner, 0.5, nullptr);
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) {
        float acc = 0;
        for (int64_t j = 0; j < mid; ++j) acc += x[static_cast<size_t>((o * mid + j) * inner + i)];
        CAPTURE(outer);
        CAPTURE(inner);
        CHECK(y[static_cast<size_t>(o * inner + i)] == acc * 0.5f);
      }
  }
}
