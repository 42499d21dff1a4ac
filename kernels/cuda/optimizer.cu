// Multi-tensor optimizer kernels (SGD, AdamW) for a whole parameter group in one launch.
// How: the group's slot table (one MultiTensorSlot per tensor: pointers, size, position) is in
// device memory; the grid strides over the concatenation of the group's tensors, each thread
// walking the table and updating the elements of each tensor that fall to it (element e of the
// concatenation to thread e % threads, so small tensors spread over different threads; the loop is
// kernels/cuda/multi_tensor.cuh). The arithmetic is the shared element update of
// kernels/optimizer.h, in f32.
// Memory traffic per element: SGD reads weight, gradient and momentum and writes weight and
// momentum (plus 2 bytes for a low-precision copy): 20 bytes with f32 gradients; AdamW reads
// weight, gradient and two moments and writes weight and both moments: 28 bytes. The slot table
// (64 bytes per tensor) is read by every thread and stays in cache.
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

void optimizer_step(const MultiTensorSlot* slots, int count, int64_t total, const SgdArgs& args, Stream stream) {
  launch_multi_tensor<Sgd>(slots, count, total, args, stream);
}

void optimizer_step(const MultiTensorSlot* slots, int count, int64_t total, const AdamWArgs& args, Stream stream) {
  launch_multi_tensor<AdamW>(slots, count, total, args, stream);
}

}  // namespace cnn::kernels::cuda
