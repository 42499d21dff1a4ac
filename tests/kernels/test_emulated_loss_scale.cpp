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
        cpu::unscale_and_check(on_cpu.slots.data(), 6, on_cpu.total, dt, inv_scale, nullptr, nullptr, cpu_result);
        cuda::unscale_and_check(emulated.slots.data(), 6, emulated.total, dt, inv_scale, nullptr, partials.data(), emu_result,
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
  cuda::unscale_and_check(&s, 1, 2, DType::f32, 1.f / 64, nullptr, partials.data(), result, nullptr);
  CHECK(result[0] == 25.f);
  CHECK(result[1] == 0.f);
  CHECK(g == std::vector<float>{3.f, 4.f});
}

TEST_CASE("loss-scale pass: with a control block the scale is read from it, on both backends") {
  for (bool emulated : {false, true}) {
    INFO((emulated ? "emulated" : "cpu"));
    std::vector<float> g = {3.f * 256, 4.f * 256};
    MultiTensorSlot s;
    s.grad = g.data();
    s.numel = 2;
    float control[kStepControlFields] = {256.f, 0, 0, 0, 1, 1, 0, 0};
    float result[2];
    std::vector<float> partials(2 * kLossScaleMaxBlocks);
    if (emulated)
      cuda::unscale_and_check(&s, 1, 2, DType::f32, 1.f /* ignored */, control, partials.data(), result, nullptr);
    else
      cpu::unscale_and_check(&s, 1, 2, DType::f32, 1.f, control, nullptr, result);
    CHECK(g == std::vector<float>{3.f, 4.f});
    CHECK(result[0] == 25.f);
  }
}

// The device-side verdict against the host rules it replaces (GradScaler, clip_grad_norm_): a
// sequence of clean and overflowing steps on both backends, every field checked after each step.
TEST_CASE("step control: the scale grows, backs off and skips as GradScaler does, the clip coefficient as clip_grad_norm_") {
  StepControlArgs a;
  a.adapt_scale = true;
  a.growth_interval = 3;
  a.max_norm = 1.0;
  for (bool emulated : {false, true}) {
    INFO((emulated ? "emulated" : "cpu"));
    float control[kStepControlFields] = {65536.f, 0, 0, 0, 1, 1, 0, 0};
    float* on_device = control;
    const auto step = [&](float sum_squares, float non_finite) {
      const float result[2] = {sum_squares, non_finite};
      if (emulated)
        cuda::step_control(result, a, on_device, nullptr);
      else
        cpu::step_control(result, a, on_device);
    };
    step(0.25f, 0);  // norm 0.5: below max_norm, no clipping
    CHECK(control[kStepControlApply] == 1.f);
    CHECK(control[kStepControlGradScale] == 1.f);
    CHECK(control[kStepControlNorm] == 0.5f);
    CHECK(control[kStepControlGrowthTracker] == 1.f);
    step(16.f, 0);  // norm 4: clipped by 1 / (4 + 1e-6)
    CHECK(control[kStepControlGradScale] == static_cast<float>(1.0 / (4.0 + 1e-6)));
    step(1.f, 0);  // third clean step in a row: the scale doubles
    CHECK(control[kStepControlScale] == 131072.f);
    CHECK(control[kStepControlGrowthTracker] == 0.f);
    step(1.f, 2);  // overflow: skipped, the scale halves, the count restarts
    CHECK(control[kStepControlApply] == 0.f);
    CHECK(control[kStepControlScale] == 65536.f);
    CHECK(control[kStepControlSkipped] == 1.f);
    CHECK(control[kStepControlSkippedInARow] == 1.f);
    step(1.f, 1);
    CHECK(control[kStepControlSkippedInARow] == 2.f);
    CHECK(control[kStepControlScale] == 32768.f);
    step(1.f, 0);  // clean again: applies, the run of skips ends, the total stays
    CHECK(control[kStepControlApply] == 1.f);
    CHECK(control[kStepControlSkippedInARow] == 0.f);
    CHECK(control[kStepControlSkipped] == 2.f);
    CHECK(control[kStepControlGrowthTracker] == 1.f);
  }
  StepControlArgs fixed;  // fp32/bf16: the scale never moves, a bad step is still skipped
  float control[kStepControlFields] = {1.f, 0, 0, 0, 1, 1, 0, 0};
  for (int i = 0; i < 5; ++i) cpu::step_control(std::vector<float>{1.f, 0.f}.data(), fixed, control);
  cpu::step_control(std::vector<float>{1.f, 1.f}.data(), fixed, control);
  CHECK(control[kStepControlScale] == 1.f);
  CHECK(control[kStepControlApply] == 0.f);
  CHECK(control[kStepControlGrowthTracker] == 0.f);
}
