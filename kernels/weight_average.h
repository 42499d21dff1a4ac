// Weight-averaging kernel: one fused pass over a table of tensors (the slot table of
// kernels/optimizer.h; param, state1, numel and start are used) that moves each average towards
// its model tensor: avg += weight * (x - avg), in f32. The same update serves both averages of
// training: an exponential moving average (EMA, weight = 1 - decay, as timm's ModelEmaV2/V3 lerp)
// and SWA's equal-weight running mean (weight = 1 / (n + 1) for the (n+1)-th model averaged, as
// torch.optim.swa_utils.AveragedModel). Weight 1 copies exactly (the first SWA member), and an
// average equal to its model stays equal to it bit for bit (x - avg is 0).
//
//   slot.param  = the model's f32 tensor (read)
//   slot.state1 = its f32 average (updated in place)
//
// Both backends read `slots` from host memory (the CUDA version passes them as kernel parameters).
#pragma once
#include <cmath>
#include <cstdint>

#include "kernels/optimizer.h"

namespace cnn::kernels {

struct WeightAverageArgs {
  float weight = 1.f;  // of the model's tensor in the new average
};

// The element update shared by the CPU reference and the CUDA kernel. The multiply-add is written as
// one fused operation (a single rounding): left as `avg + weight * (x - avg)`, each compiler decides
// whether to contract it (nvcc does by default, GCC where the target has FMA instructions), and the
// two backends' averages would differ in their last bits.
CNN_HD void weight_average_update(const WeightAverageArgs& a, const MultiTensorSlot& s, int64_t i) {
  const float x = s.param[i];
  const float avg = s.state1[i];
  s.state1[i] = a.weight == 1.f ? x : std::fma(a.weight, x - avg, avg);
}

#define CNN_WEIGHT_AVERAGE_KERNELS(...) \
  void weight_average(const MultiTensorSlot* slots, int count, int64_t total, const WeightAverageArgs& args __VA_ARGS__);

namespace cpu {
CNN_WEIGHT_AVERAGE_KERNELS(, Stream stream = nullptr)
}
namespace cuda {
CNN_WEIGHT_AVERAGE_KERNELS(, Stream stream)
}
#undef CNN_WEIGHT_AVERAGE_KERNELS

}  // namespace cnn::kernels
