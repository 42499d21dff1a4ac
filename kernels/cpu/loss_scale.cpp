// CPU reference of the loss-scale pass: unscales every gradient, sums the squares (in double) and
// counts non-finite elements, chunk by chunk over the whole table (kernels/cpu/multi_tensor.h), the
// chunks' partial sums added in chunk order (the same total on any number of threads); the step's
// verdict from them. Traffic: one read of the gradients, and one write when the scale is not 1.
#include "kernels/loss_scale.h"

#include <cmath>
#include <type_traits>

#include "kernels/cpu/multi_tensor.h"

namespace cnn::kernels::cpu {

namespace {
// One chunk's {sum of squares, non-finite count}, as one SIMD reduction: the compiler keeps a vector
// of running sums (one running sum is a serial chain of double additions, about 6 GB/s) and adds its
// lanes at the end, an order fixed by the chunk and the build, not by the thread count. The dtype
// and whether to write back are compile-time constants of the loop.
template <DType kDType, bool kRescale>
void measure_chunk(void* grad, int64_t begin, int64_t end, float inv_scale, double& sum_squares, int64_t& non_finite) {
  double sum = 0;
  int64_t bad = 0;
#pragma omp simd reduction(+ : sum, bad)
  for (int64_t i = begin; i < end; ++i) {
    float g = load_grad(kDType, grad, i);
    if constexpr (kRescale) {
      g *= inv_scale;
      if constexpr (kDType == DType::f32)
        static_cast<float*>(grad)[i] = g;
      else
        store_copy(kDType, grad, i, g);
    }
    const bool finite = std::isfinite(g);
    sum += finite ? static_cast<double>(g) * g : 0.0;
    bad += finite ? 0 : 1;
  }
  sum_squares = sum;
  non_finite = bad;
}
}  // namespace

void unscale_and_check(const MultiTensorSlot* slots, int count, int64_t /*total*/, DType grad_dtype, float inv_scale,
                       const float* control, float* /*partials*/, float* result, Stream) {
  if (control != nullptr) inv_scale = 1.f / control[kStepControlScale];
  const std::vector<SlotChunk> chunks = slot_chunks(slots, count);
  std::vector<double> sum_squares(chunks.size());
  std::vector<int64_t> non_finite(chunks.size());
  auto pick = [&](auto rescale) {
    constexpr bool kRescale = decltype(rescale)::value;
    return grad_dtype == DType::f16    ? &measure_chunk<DType::f16, kRescale>
           : grad_dtype == DType::bf16 ? &measure_chunk<DType::bf16, kRescale>
                                       : &measure_chunk<DType::f32, kRescale>;
  };
  // unscale_element's rule (kernels/loss_scale.h): a scale of 1 leaves the gradients unwritten.
  auto measure = inv_scale != 1.f ? pick(std::true_type{}) : pick(std::false_type{});
  for_each_chunk(chunks, [&](int64_t c, const SlotChunk& chunk) {
    measure(slots[chunk.slot].grad, chunk.begin, chunk.end, inv_scale, sum_squares[static_cast<size_t>(c)],
            non_finite[static_cast<size_t>(c)]);
  });
  double total_squares = 0;
  int64_t total_non_finite = 0;
  for (size_t c = 0; c < chunks.size(); ++c) {
    total_squares += sum_squares[c];
    total_non_finite += non_finite[c];
  }
  result[0] = static_cast<float>(total_squares);
  result[1] = static_cast<float>(total_non_finite);
}

void step_control(const float* result, const StepControlArgs& args, float* control, Stream) {
  update_step_control(args, result, control);
}

}  // namespace cnn::kernels::cpu
