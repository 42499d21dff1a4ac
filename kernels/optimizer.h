// Optimizer update kernels: SGD (momentum, Nesterov, L2 weight decay, as torch.optim.SGD with
// dampening 0) and AdamW (decoupled weight decay, bias correction, as torch.optim.AdamW), applied
// to a whole parameter group at once. The group is a table of tensors (MultiTensorSlot); on CUDA
// the table lives in device memory and one kernel launch updates every tensor of the group.
//
// Master weights and optimizer state are f32; gradients may be f32, f16 or bf16 (one dtype per
// group) and are multiplied by grad_scale first (1 / loss scale, times the clipping coefficient).
// A slot may name a low-precision copy of its weight (f16 or bf16, one dtype per group), which the
// same pass writes from the updated f32 weight.
//
// The step can be governed from the device, so that the host never waits for it: `control` points
// at the step's control block (kStepControl* below, written by the loss-scale pass's
// step_control kernel): the update runs only when it says so, with its gradient multiplier (the
// clipping coefficient) folded into grad_scale; and each slot's `step_count` (an f32 counter on the
// device, as PyTorch's capturable optimizers keep it) counts the steps that applied, from which
// AdamW derives its bias corrections. Without them (null), the step always applies with the
// bias corrections the slot carries. `lr_from`, when set, points at the learning rate on the device
// (read once per launch), so that a captured step can be replayed with the schedule's next rate.
//
// The per-element update functions below are shared by the CPU reference and the CUDA kernels.
#pragma once
#include <cmath>
#include <cstdint>

#include "kernels/common/dtype.h"
#include "kernels/common/half.h"

namespace cnn::kernels {

using Stream = void*;

struct MultiTensorSlot {
  float* param = nullptr;        // f32 master weight, updated in place
  void* grad = nullptr;          // gradient of the group's grad dtype (the loss scaler rescales it)
  float* state1 = nullptr;       // SGD: momentum buffer (null without momentum); AdamW: exp_avg
  float* state2 = nullptr;       // AdamW: exp_avg_sq
  void* param_copy = nullptr;    // low-precision weight written after the update (null: none)
  int64_t numel = 0;
  int64_t start = 0;             // position of this tensor in the group's concatenation (load balance)
  float* step_count = nullptr;   // steps this tensor has taken (null: bias corrections as given below)
  float bias_correction1 = 1.f;  // AdamW: 1 - beta1^step of this tensor's step count
  float bias_correction2 = 1.f;  // AdamW: 1 - beta2^step
};

// The step's control block: kStepControlFields f32 values on the training device.
enum StepControlField : int {
  kStepControlScale = 0,          // the loss scale the next backward runs at (1 outside fp16)
  kStepControlGrowthTracker = 1,  // clean steps in a row since the scale last changed
  kStepControlSkipped = 2,        // steps skipped so far (inf/nan gradients)
  kStepControlSkippedInARow = 3,  // of them, in a row up to the last step
  kStepControlApply = 4,          // 1: the last step's update applies; 0: it is skipped
  kStepControlGradScale = 5,      // the last step's gradient multiplier (clipping coefficient)
  kStepControlNorm = 6,           // the last step's global gradient norm (unscaled)
  kStepControlFields = 8
};

struct SgdArgs {
  float lr = 0, momentum = 0, weight_decay = 0, grad_scale = 1;
  const float* control = nullptr;  // the step's control block (null: the step applies)
  const float* lr_from = nullptr;  // the learning rate, read on the device instead of lr (null: lr)
  bool nesterov = false;
  DType grad_dtype = DType::f32;
  DType copy_dtype = DType::f16;  // of the param_copy buffers
};

struct AdamWArgs {
  float lr = 0, beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f, weight_decay = 0, grad_scale = 1;
  double bias_beta1 = 0.9, bias_beta2 = 0.999;  // the betas in double, for bias corrections from step_count
  const float* control = nullptr;
  const float* lr_from = nullptr;
  DType grad_dtype = DType::f32;
  DType copy_dtype = DType::f16;
};

// ---- the step's gate and per-slot preparation (once per launch and per slot, not per element) ----

// Whether the update applies, with the control block's multiplier folded into grad_scale.
CNN_HD bool control_allows(const float* control, float& grad_scale) {
  if (control == nullptr) return true;
  if (control[kStepControlApply] == 0.f) return false;
  grad_scale *= control[kStepControlGradScale];
  return true;
}
// The learning rate from the device when the step reads it there (a replayed graph's step, whose
// kernel arguments were fixed at capture).
CNN_HD void load_learning_rate(const float* lr_from, float& lr) {
  if (lr_from != nullptr) lr = *lr_from;
}
CNN_HD bool apply_step_control(SgdArgs& a) {
  load_learning_rate(a.lr_from, a.lr);
  return control_allows(a.control, a.grad_scale);
}
CNN_HD bool apply_step_control(AdamWArgs& a) {
  load_learning_rate(a.lr_from, a.lr);
  return control_allows(a.control, a.grad_scale);
}
template <class Args>
CNN_HD bool apply_step_control(Args&) {  // kernels without a control block (weight averaging)
  return true;
}

// AdamW's bias corrections of this step from the slot's step count, in double as PyTorch computes
// them (1 - beta^t for the t-th step). SGD and weight averaging need nothing per slot.
CNN_HD void prepare_slot(const AdamWArgs& a, MultiTensorSlot& s) {
  if (s.step_count == nullptr) return;
  const double t = static_cast<double>(*s.step_count) + 1.0;
  s.bias_correction1 = static_cast<float>(1.0 - ::pow(a.bias_beta1, t));
  s.bias_correction2 = static_cast<float>(1.0 - ::pow(a.bias_beta2, t));
}
template <class Args>
CNN_HD void prepare_slot(const Args&, MultiTensorSlot&) {}

// After a step that applied: the slot has taken one more.
CNN_HD void count_step(const MultiTensorSlot& s) {
  if (s.step_count != nullptr) *s.step_count += 1.f;
}

// ---- element functions ----

// Multi-tensor kernels treat a group as the concatenation of its tensors, element `start + i` being
// element i of a slot, and hand element e to global thread e % threads. This is the first element
// of slot s that global thread `thread` updates (it then steps by `threads`).
CNN_HD int64_t first_element(const MultiTensorSlot& s, int64_t thread, int64_t threads) {
  return ((thread - s.start) % threads + threads) % threads;
}

// Gradient element i of a buffer of dtype dt, as float.
CNN_HD float load_grad(DType dt, const void* grad, int64_t i) {
  switch (dt) {
    case DType::f16: return half_bits_to_float(static_cast<const half*>(grad)[i].bits);
    case DType::bf16: return bf16_bits_to_float(static_cast<const bfloat16*>(grad)[i].bits);
    default: return static_cast<const float*>(grad)[i];
  }
}

// Writes element i of a low-precision weight copy.
CNN_HD void store_copy(DType dt, void* copy, int64_t i, float value) {
  if (dt == DType::bf16)
    static_cast<bfloat16*>(copy)[i].bits = float_to_bf16_bits(value);
  else
    static_cast<half*>(copy)[i].bits = float_to_half_bits(value);
}

// torch.optim.SGD: g += wd p; buf = momentum buf + g (buf starts at zero, so the first step sets
// buf = g); g = nesterov ? g + momentum buf : buf; p -= lr g.
CNN_HD void sgd_update(const SgdArgs& a, const MultiTensorSlot& s, int64_t i) {
  float g = load_grad(a.grad_dtype, s.grad, i) * a.grad_scale;
  float p = s.param[i];
  g += a.weight_decay * p;
  if (s.state1) {
    const float buf = a.momentum * s.state1[i] + g;
    s.state1[i] = buf;
    g = a.nesterov ? g + a.momentum * buf : buf;
  }
  p -= a.lr * g;
  s.param[i] = p;
  if (s.param_copy) store_copy(a.copy_dtype, s.param_copy, i, p);
}

// torch.optim.AdamW: p *= 1 - lr wd; m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2;
// p -= (lr / bc1) m / (sqrt(v) / sqrt(bc2) + eps).
CNN_HD void adamw_update(const AdamWArgs& a, const MultiTensorSlot& s, int64_t i) {
  const float g = load_grad(a.grad_dtype, s.grad, i) * a.grad_scale;
  float p = s.param[i] * (1.f - a.lr * a.weight_decay);
  const float m = a.beta1 * s.state1[i] + (1.f - a.beta1) * g;
  const float v = a.beta2 * s.state2[i] + (1.f - a.beta2) * g * g;
  s.state1[i] = m;
  s.state2[i] = v;
  const float denom = sqrtf(v) / sqrtf(s.bias_correction2) + a.eps;
  p -= (a.lr / s.bias_correction1) * m / denom;
  s.param[i] = p;
  if (s.param_copy) store_copy(a.copy_dtype, s.param_copy, i, p);
}

// ---- kernels over a group of `count` slots holding `total` elements together ----
// Both backends read the table from host memory: the CUDA versions pass it to the kernel by value
// (kernel parameters, in launches of up to kSlotsPerLaunch slots), so no upload and no host
// synchronisation precede the step. The step counts are advanced after the update, when it applied.
// One overload per optimizer, chosen by the type of `args`.
#define CNN_OPTIMIZER_KERNELS(...)                                                                              \
  void optimizer_step(const MultiTensorSlot* slots, int count, int64_t total, const SgdArgs& args __VA_ARGS__); \
  void optimizer_step(const MultiTensorSlot* slots, int count, int64_t total, const AdamWArgs& args __VA_ARGS__);

namespace cpu {
CNN_OPTIMIZER_KERNELS(, Stream stream = nullptr)
}
namespace cuda {
CNN_OPTIMIZER_KERNELS(, Stream stream)
}
#undef CNN_OPTIMIZER_KERNELS

}  // namespace cnn::kernels
