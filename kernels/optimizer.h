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
  float bias_correction1 = 1.f;  // AdamW: 1 - beta1^step of this tensor's step count
  float bias_correction2 = 1.f;  // AdamW: 1 - beta2^step
};

struct SgdArgs {
  float lr = 0, momentum = 0, weight_decay = 0, grad_scale = 1;
  bool nesterov = false;
  DType grad_dtype = DType::f32;
  DType copy_dtype = DType::f16;  // of the param_copy buffers
};

struct AdamWArgs {
  float lr = 0, beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f, weight_decay = 0, grad_scale = 1;
  DType grad_dtype = DType::f32;
  DType copy_dtype = DType::f16;
};

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
// The CPU versions read `slots` from host memory; the CUDA versions from device memory.
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
