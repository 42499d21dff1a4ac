// Multi-tensor optimizer kernels (SGD, AdamW) for a whole parameter group in one launch (per
// kSlotsPerLaunch tensors).
// How: the shared multi-tensor launch (kernels/cuda/multi_tensor.cuh): the group's table travels
// as kernel parameters; each block takes one chunk of one tensor at a time and its threads stride
// through it, applying the shared element update of kernels/optimizer.h in f32. When the step is
// governed from the device, the whole grid returns at once if the control block says the step is
// skipped, and a one-block launch then advances each tensor's step count (AdamW's bias
// corrections are computed once per chunk from it, in double).
// Memory traffic per element: SGD reads weight, gradient and momentum and writes weight and
// momentum (plus 2 bytes for a low-precision copy): 20 bytes with f32 gradients; AdamW reads
// weight, gradient and two moments and writes weight and both moments: 28 bytes. Nothing else:
// the table is in the kernel's parameter space.
#include "kernels/cuda/multi_tensor.cuh"
#include "kernels/optimizer.h"

namespace cnn::kernels::cuda {

namespace {
struct Sgd {
  using Args = SgdArgs;
  __device__ void operator()(const SgdArgs& a, const MultiTensorSlot& s, int64_t i) const { sgd_update(a, s, i); }
};
struct AdamW {
  using Args = AdamWArgs;
  __device__ void operator()(const AdamWArgs& a, const MultiTensorSlot& s, int64_t i) const { adamw_update(a, s, i); }
};
}  // namespace

void optimizer_step(const MultiTensorSlot* slots, int count, int64_t /*total*/, const SgdArgs& args, Stream stream) {
  launch_multi_tensor<Sgd>(slots, count, args, stream);
  launch_count_steps(slots, count, args, stream);
}

void optimizer_step(const MultiTensorSlot* slots, int count, int64_t /*total*/, const AdamWArgs& args, Stream stream) {
  launch_multi_tensor<AdamW>(slots, count, args, stream);
  launch_count_steps(slots, count, args, stream);
}

}  // namespace cnn::kernels::cuda
