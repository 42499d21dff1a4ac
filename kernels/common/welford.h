// Per-channel mean and variance in one pass: Welford's update adds one value to a running
// (count, mean, M2 = sum of squared deviations from the mean); Chan et al.'s formula merges two such
// summaries. Both stay accurate when the mean is large against the spread, where a sum and a sum of
// squares would cancel (values of 1000 +- 1 lose all their variance to float rounding that way).
#pragma once
#include "kernels/common/host_device.h"

namespace cnn {

// Adds x to (mean, m2), whose count has just been incremented to 1 / inv_count.
template <class A>
CNN_HD void welford_add(A& mean, A& m2, A x, A inv_count) {
  const A delta = x - mean;
  mean += delta * inv_count;
  m2 += delta * (x - mean);
}

// Merges (count_b, mean_b, m2_b) into (count_a, mean_a, m2_a). Either may be empty (count 0).
template <class A>
CNN_HD void chan_merge(A& count_a, A& mean_a, A& m2_a, A count_b, A mean_b, A m2_b) {
  const A count = count_a + count_b;
  if (count_b == A(0)) return;
  const A delta = mean_b - mean_a, weight_b = count_b / count;
  mean_a += delta * weight_b;
  m2_a += m2_b + delta * delta * count_a * weight_b;
  count_a = count;
}

}  // namespace cnn
