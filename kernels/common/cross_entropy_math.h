// Target probability q[r, k] of a cross-entropy, shared by the CPU and CUDA kernels.
#pragma once
#include <cstdint>

#include "kernels/common/host_device.h"
#include "kernels/softmax.h"

namespace cnn {

template <class A>
CNN_HD A cross_entropy_target(const kernels::CrossEntropyTargets& t, int64_t r, int64_t k, int64_t cols) {
  if (t.soft) return static_cast<const A*>(t.soft)[r * cols + k];
  const A on = t.labels[r] == k ? A(1) : A(0);
  return (A(1) - A(t.smoothing)) * on + A(t.smoothing) / static_cast<A>(cols);
}

}  // namespace cnn
