// The loss-scale pass (kernels/cuda/loss_scale.cu) under host emulation against the CPU reference:
// unscaled gradients bit for bit, the sum of squares to float rounding, and the exact count of
// inf/nan elements, for f32, f16 and bf16 gradients spread over tensors of assorted sizes.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/elementwise.h"
#include "kernels/loss_scale.h"

using namespace cnn;
using namespace cnn::kernels;

namespace {
struct Grads {
  std::vector<std::vector<uint8_t>> buffers;
  std::vector<MultiTensorSlot> slots;
  int64_t total = 0;
  Grads(DType dt, const std::vector<int64_t>& sizes) {
    uint64_t seed = 3;
    for (int64_t n : sizes) {
      buffers.emplace_back(static_cast<size_t>(n * dtype_size(dt)) + 1);
      cpu::random_fill(dt, buffers.back().data(), n, RandomKind::normal, seed++, 0, 0.0, 1000.0);
      MultiTensorSlot s;
      s.grad = buffers.back().data();
      s.numel = n;
      s.start = total;
      slots.push_back(s);
      total += n;
    }
  }
  void poison(DType dt, size_t tensor, int64_t i, double value) {
    cpu::fill(dt, buffers[tensor].data() + i * dtype_size(dt), 1, value);
  }
};
}  // namespace

TEST_CASE("loss-scale pass: unscaled gradients, sum of squares and inf/nan count match the CPU") {
  const std::vector<int64_t> sizes = {700, 5, 0, 64, 1, 333};
  for (DType dt : {DType::f32, DType::f16, DType::bf16}) {
    for (int poisoned = 0; poisoned < 3; ++poisoned) {
      for (float inv_scale : {1.f, 1.f / 1024.f}) {
        INFO(dtype_name(dt) << ", " << poisoned << " poisoned, inv_scale " << inv_scale);
        Grads on_cpu(dt, sizes), emulated(dt, sizes);
        for (Grads* g : {&on_cpu, &emulated}) {
          if (poisoned >= 1) g->poison(dt, 5, 100, std::numeric_limits<double>::infinity());
          if (poisoned >= 2) g->poison(dt, 0, 699, std::numeric_limits<double>::quiet_NaN());
        }
        float cpu_result[2] = {-1, -1}, emu_result[2] = {-1, -1};
        std::vector<float> partials(2 * kLossScaleMaxBlocks, std::numeric_limits<float>::quiet_NaN());
        cpu::unscale_and_check(on_cpu.slots.data(), 6, on_cpu.total, dt, inv_scale, nullptr, cpu_result);
        cuda::unscale_and_check(emulated.slots.data(), 6, emulated.total, dt, inv_scale, partials.data(), emu_result,
                                nullptr);
        CHECK(emu_result[1] == static_cast<float>(poisoned));
        CHECK(cpu_result[1] == static_cast<float>(poisoned));
        CHECK(emu_result[0] == doctest::Approx(cpu_result[0]).epsilon(1e-5));
        CHECK(cpu_result[0] > 0);
        for (size_t t = 0; t < sizes.size(); ++t)
          CHECK(std::memcmp(on_cpu.buffers[t].data(), emulated.buffers[t].data(), on_cpu.buffers[t].size()) == 0);
      }
    }
  }
}

TEST_CASE("loss-scale pass: the sum of squares is that of the unscaled values") {
  std::vector<float> g = {3.f * 64, 4.f * 64};
  MultiTensorSlot s;
  s.grad = g.data();
  s.numel = 2;
  float result[2];
  std::vector<float> partials(2 * kLossScaleMaxBlocks);
  cuda::unscale_and_check(&s, 1, 2, DType::f32, 1.f / 64, partials.data(), result, nullptr);
  CHECK(result[0] == 25.f);
  CHECK(result[1] == 0.f);
  CHECK(g == std::vector<float>{3.f, 4.f});
}
