// The weight-averaging kernel (kernels/cuda/weight_average.cu: EMA and SWA) under host emulation
// against the CPU reference: a table of tensors below, around and above the emulated grid (3 blocks
// of 64 threads), an empty one included, so every thread walks several tensors; EMA weights
// (1 - decay), SWA's 1/(n+1) and the copy of weight 1. Both backends run the same element function,
// so the averages must agree bit for bit.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "emulation_test_support.h"
#include "kernels/elementwise.h"
#include "kernels/weight_average.h"

using namespace cnn;
using namespace cnn::kernels;
using cnn::testing::same_bits;

namespace {
const std::vector<int64_t> kSizes = {1000, 3, 64, 0, 1, 517, 192};

// A model's tensors and their averages.
struct Averages {
  std::vector<std::vector<float>> model, average;
  std::vector<MultiTensorSlot> slots;
  int64_t total = 0;

  explicit Averages(uint64_t model_seed) {
    uint64_t seed = 100;
    for (int64_t n : kSizes) {
      model.emplace_back(static_cast<size_t>(n));
      average.emplace_back(static_cast<size_t>(n));
      cpu::random_fill(DType::f32, model.back().data(), n, RandomKind::normal, model_seed++, 0, 0.0, 1.0);
      cpu::random_fill(DType::f32, average.back().data(), n, RandomKind::normal, seed++, 0, 0.0, 1.0);
    }
    for (size_t t = 0; t < kSizes.size(); ++t) {
      MultiTensorSlot s;
      s.param = model[t].data();
      s.state1 = average[t].data();
      s.numel = kSizes[t];
      s.start = total;
      slots.push_back(s);
      total += kSizes[t];
    }
  }
  Averages(const Averages&) = delete;
  void run_cpu(float weight) { cpu::weight_average(slots.data(), static_cast<int>(slots.size()), total, {weight}); }
  void run_emulated(float weight) { cuda::weight_average(slots.data(), static_cast<int>(slots.size()), total, {weight}, nullptr); }
};
}  // namespace

TEST_CASE("weight average: EMA and SWA updates on the emulated device match the CPU bit for bit") {
  for (float weight : {1.f - 0.9998f, 0.1f, 0.5f, 1.f / 3.f, 1.f}) {
    INFO("weight " << weight);
    Averages on_cpu(1), emulated(1);
    const std::vector<std::vector<float>> before = on_cpu.average;
    for (uint64_t update = 0; update < 3; ++update) {
      on_cpu.run_cpu(weight);
      emulated.run_emulated(weight);
    }
    for (size_t t = 0; t < kSizes.size(); ++t) {
      INFO("tensor " << t << " of " << kSizes[t] << " elements");
      CHECK(same_bits(on_cpu.average[t], emulated.average[t]));
      CHECK(on_cpu.model[t] == emulated.model[t]);  // the model is only read
    }
    CHECK(on_cpu.average[0] != before[0]);  // it did update
    if (weight == 1.f) CHECK(emulated.average == emulated.model);  // weight 1 copies exactly
  }
}

TEST_CASE("weight average: one update is fma(weight, x - avg, avg) in f32, one rounding on both backends") {
  // Written as avg + weight * (x - avg), whether the multiply-add was fused was each compiler's
  // choice (nvcc fuses by default; GCC where the target has FMA instructions, as the CPU kernels'
  // -march=native build does but this emulation build does not), so a GPU's averages and the CPU's
  // could differ in their last bits. 0.1 is not a power of two: the product is inexact, and for many
  // elements the fused and the twice-rounded results differ.
  constexpr float weight = 0.1f;
  Averages emulated(7), on_cpu(7);
  const std::vector<std::vector<float>> before = emulated.average;
  emulated.run_emulated(weight);
  on_cpu.run_cpu(weight);
  int differ_when_rounded_twice = 0;
  for (size_t t = 0; t < kSizes.size(); ++t)
    for (size_t i = 0; i < before[t].size(); ++i) {
      const float x = emulated.model[t][i], avg = before[t][i];
      const float fused = std::fma(weight, x - avg, avg);
      volatile float product = weight * (x - avg);  // rounded on its own: no contraction
      if (avg + product != fused) ++differ_when_rounded_twice;
      REQUIRE(emulated.average[t][i] == fused);
      REQUIRE(on_cpu.average[t][i] == fused);
    }
  CHECK(differ_when_rounded_twice > 0);  // the test can tell the two apart
}
