// The multi-tensor optimizer kernels (kernels/cuda/optimizer.cu) under host emulation against the
// CPU reference: SGD (plain, momentum, Nesterov, weight decay) and AdamW, with f32, f16 and bf16
// gradients, gradient scaling, and the low-precision weight copy written in the same pass. The
// group mixes tensor sizes below, around and above the emulated grid (3 blocks of 64 threads),
// including an empty one, so every thread walks several tensors. Both backends run the same
// element function, so results must agree bit for bit.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "emulation_test_support.h"
#include "kernels/elementwise.h"
#include "kernels/optimizer.h"

using namespace cnn;
using namespace cnn::kernels;
using cnn::testing::same_bits;

namespace {
const std::vector<int64_t> kSizes = {1000, 3, 64, 0, 1, 517, 192};

// One parameter group's buffers: weights, gradients, two state buffers and weight copies.
struct Group {
  DType grad_dtype, copy_dtype;
  std::vector<std::vector<float>> params, state1, state2;
  std::vector<std::vector<uint8_t>> grads, copies;
  std::vector<MultiTensorSlot> slots;
  int64_t total = 0;

  Group(DType grad_dt, DType copy_dt, bool with_state1, bool with_copy) : grad_dtype(grad_dt), copy_dtype(copy_dt) {
    uint64_t seed = 10;
    for (int64_t n : kSizes) {
      params.emplace_back(static_cast<size_t>(n));
      state1.emplace_back(static_cast<size_t>(n));
      state2.emplace_back(static_cast<size_t>(n));
      grads.emplace_back(static_cast<size_t>(n * dtype_size(grad_dt)) + 1);
      copies.emplace_back(static_cast<size_t>(n * 2) + 1);
      cpu::random_fill(DType::f32, params.back().data(), n, RandomKind::normal, seed++, 0, 0.0, 1.0);
      cpu::random_fill(DType::f32, state1.back().data(), n, RandomKind::normal, seed++, 0, 0.0, 0.1);
      cpu::random_fill(DType::f32, state2.back().data(), n, RandomKind::uniform, seed++, 0, 0.0, 0.01);
      cpu::random_fill(grad_dt, grads.back().data(), n, RandomKind::normal, seed++, 0, 0.0, 100.0);
    }
    for (size_t t = 0; t < kSizes.size(); ++t) {
      MultiTensorSlot s;
      s.param = params[t].data();
      s.grad = grads[t].data();
      s.state1 = with_state1 ? state1[t].data() : nullptr;
      s.state2 = state2[t].data();
      s.param_copy = with_copy && t % 2 == 0 ? copies[t].data() : nullptr;
      s.numel = kSizes[t];
      s.start = total;
      s.bias_correction1 = 1.f - 0.9f * static_cast<float>(t + 1) / 10.f;  // per-tensor step counts differ
      s.bias_correction2 = 1.f - 0.99f * static_cast<float>(t + 1) / 10.f;
      slots.push_back(s);
      total += kSizes[t];
    }
  }
  Group(const Group&) = delete;
};

void expect_same(const Group& got, const Group& want) {
  for (size_t t = 0; t < kSizes.size(); ++t) {
    INFO("tensor " << t << " of " << kSizes[t] << " elements");
    CHECK(same_bits(got.params[t], want.params[t]));
    CHECK(same_bits(got.state1[t], want.state1[t]));
    CHECK(same_bits(got.state2[t], want.state2[t]));
    CHECK(same_bits(got.copies[t], want.copies[t]));
  }
}
}  // namespace

TEST_CASE("multi-tensor SGD: every variant and gradient dtype matches the CPU bit for bit") {
  for (DType grad_dt : {DType::f32, DType::f16, DType::bf16}) {
    for (int variant = 0; variant < 4; ++variant) {  // plain, momentum, Nesterov, momentum without decay
      INFO("grad " << dtype_name(grad_dt) << ", variant " << variant);
      SgdArgs a;
      a.lr = 0.05f;
      a.momentum = variant == 0 ? 0.f : 0.9f;
      a.nesterov = variant == 2;
      a.weight_decay = variant == 3 ? 0.f : 1e-2f;
      a.grad_scale = 1.f / 128.f;
      a.grad_dtype = grad_dt;
      a.copy_dtype = variant % 2 ? DType::bf16 : DType::f16;
      Group on_cpu(grad_dt, a.copy_dtype, variant != 0, true), emulated(grad_dt, a.copy_dtype, variant != 0, true);
      for (int step = 0; step < 2; ++step) {
        cpu::optimizer_step(on_cpu.slots.data(), static_cast<int>(on_cpu.slots.size()), on_cpu.total, a);
        cuda::optimizer_step(emulated.slots.data(), static_cast<int>(emulated.slots.size()), emulated.total, a, nullptr);
      }
      expect_same(emulated, on_cpu);
      CHECK(on_cpu.params[0] != Group(grad_dt, a.copy_dtype, false, false).params[0]);  // it did update
    }
  }
}

TEST_CASE("multi-tensor AdamW: every gradient dtype matches the CPU bit for bit") {
  for (DType grad_dt : {DType::f32, DType::f16, DType::bf16}) {
    for (float weight_decay : {0.f, 0.05f}) {
      INFO("grad " << dtype_name(grad_dt) << ", weight decay " << weight_decay);
      AdamWArgs a;
      a.lr = 1e-3f;
      a.weight_decay = weight_decay;
      a.grad_scale = 0.5f;
      a.grad_dtype = grad_dt;
      a.copy_dtype = DType::bf16;
      Group on_cpu(grad_dt, a.copy_dtype, true, true), emulated(grad_dt, a.copy_dtype, true, true);
      for (int step = 0; step < 2; ++step) {
        cpu::optimizer_step(on_cpu.slots.data(), static_cast<int>(on_cpu.slots.size()), on_cpu.total, a);
        cuda::optimizer_step(emulated.slots.data(), static_cast<int>(emulated.slots.size()), emulated.total, a, nullptr);
      }
      expect_same(emulated, on_cpu);
    }
  }
}

// The step governed from the device (kernels/optimizer.h): a control block that says "skip" leaves
// every weight, state and step count as it was; one that says "apply" multiplies the gradients by
// its coefficient; each tensor's step count advances after an applied step, and AdamW's bias
// corrections come from it as the host computed them; the learning rate is read from the device.
// Both backends, bit for bit.
TEST_CASE("multi-tensor optimizers: the device's control block gates the step and scales its gradients, at the device's learning rate") {
  for (bool adamw : {false, true}) {
    INFO((adamw ? "AdamW" : "SGD"));
    Group on_cpu(DType::f32, DType::f16, true, true), emulated(DType::f32, DType::f16, true, true),
        host_governed(DType::f32, DType::f16, true, true);
    std::vector<float> cpu_steps(kSizes.size(), 4.f), emu_steps(kSizes.size(), 4.f);
    for (size_t t = 0; t < kSizes.size(); ++t) {
      on_cpu.slots[t].step_count = &cpu_steps[t];
      emulated.slots[t].step_count = &emu_steps[t];
      // What the host gave before: the bias corrections of the 5th step.
      host_governed.slots[t].bias_correction1 = static_cast<float>(1.0 - std::pow(0.9, 5.0));
      host_governed.slots[t].bias_correction2 = static_cast<float>(1.0 - std::pow(0.999, 5.0));
    }
    float control[kStepControlFields] = {1.f, 0, 0, 0, 0.f /* skip */, 0.25f, 0, 0};
    // The learning rates are read "on the device" (lr_from); the lr arguments are decoys.
    const float adamw_lr = 1e-3f, sgd_lr = 0.05f;
    const auto run = [&](Group& g, bool on_emulation, const float* block) {
      const int n = static_cast<int>(g.slots.size());
      if (adamw) {
        AdamWArgs a;
        a.lr = 7.f;
        a.lr_from = &adamw_lr;
        a.grad_scale = 0.5f;
        a.control = block;
        if (on_emulation) cuda::optimizer_step(g.slots.data(), n, g.total, a, nullptr);
        else cpu::optimizer_step(g.slots.data(), n, g.total, a);
      } else {
        SgdArgs a;
        a.lr = 7.f;
        a.lr_from = &sgd_lr;
        a.momentum = 0.9f;
        a.grad_scale = 0.5f;
        a.control = block;
        if (on_emulation) cuda::optimizer_step(g.slots.data(), n, g.total, a, nullptr);
        else cpu::optimizer_step(g.slots.data(), n, g.total, a);
      }
    };
    const Group untouched(DType::f32, DType::f16, true, true);
    run(on_cpu, false, control);
    run(emulated, true, control);
    expect_same(on_cpu, untouched);  // skipped: nothing moved
    expect_same(emulated, untouched);
    CHECK(cpu_steps == std::vector<float>(kSizes.size(), 4.f));
    CHECK(emu_steps == std::vector<float>(kSizes.size(), 4.f));

    control[kStepControlApply] = 1.f;  // apply, gradients times 0.25 on top of grad_scale 0.5
    run(on_cpu, false, control);
    run(emulated, true, control);
    expect_same(emulated, on_cpu);
    CHECK(cpu_steps == std::vector<float>(kSizes.size(), 5.f));
    CHECK(emu_steps == std::vector<float>(kSizes.size(), 5.f));
    // The same update governed by the host: grad_scale 0.5 * 0.25, bias corrections and learning
    // rate given.
    const int n = static_cast<int>(host_governed.slots.size());
    if (adamw) {
      AdamWArgs a;
      a.lr = 1e-3f;
      a.grad_scale = 0.125f;
      cpu::optimizer_step(host_governed.slots.data(), n, host_governed.total, a);
    } else {
      SgdArgs a;
      a.lr = 0.05f;
      a.momentum = 0.9f;
      a.grad_scale = 0.125f;
      cpu::optimizer_step(host_governed.slots.data(), n, host_governed.total, a);
    }
    expect_same(on_cpu, host_governed);
    CHECK(on_cpu.params[0] != untouched.params[0]);
  }
}
