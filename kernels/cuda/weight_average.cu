// Weight averaging on CUDA (EMA and SWA, kernels/weight_average.h): every average of a model
// moved towards its tensor, avg += weight * (x - avg), in one launch over the whole table.
// How: the shared multi-tensor launch (kernels/cuda/multi_tensor.cuh): the table (model tensor and
// average per slot) travels as kernel parameters, each block takes one chunk of one tensor at a
// time and applies the element update shared with the CPU reference.
// Memory traffic per element: reads the model's f32 value and the average, writes the average:
// 12 bytes (8 when weight is 1: a copy).
#include "kernels/cuda/multi_tensor.cuh"
#include "kernels/weight_average.h"

namespace cnn::kernels::cuda {

namespace {
struct Average {
  using Args = WeightAverageArgs;
  __device__ void operator()(const WeightAverageArgs& a, const MultiTensorSlot& s, int64_t i) const {
    weight_average_update(a, s, i);
  }
};
}  // namespace

void weight_average(const MultiTensorSlot* slots, int count, int64_t /*total*/, const WeightAverageArgs& args,
                    Stream stream) {
  launch_multi_tensor<Average>(slots, count, args, stream);
}

}  // namespace cnn::kernels::cuda
