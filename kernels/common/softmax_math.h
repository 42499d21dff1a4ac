// The row formulas of softmax and log-softmax over the last axis, written once for the CPU and CUDA
// kernels (which differ only in how a row is walked and summed). A row x is shifted by its maximum
// m (max_of: a NaN makes the row NaN) and summed as s = sum_k exp(x_k - m); then
//   softmax y_k = exp(x_k - m) / s,   log-softmax y_k = x_k - m - log(s).
// C is the compute type (float, or double for f64).
#pragma once
#include <cmath>

#include "kernels/common/host_device.h"
#include "kernels/common/max_math.h"

namespace cnn {

// A term of the row's sum of exponentials.
template <class C>
CNN_HD C exp_shifted(C x, C row_max) {
  return std::exp(x - row_max);
}

template <class C>
CNN_HD C softmax_output(C x, C row_max, C sum_exp, C log_sum_exp, bool log) {
  const C shifted = x - row_max;
  return log ? shifted - log_sum_exp : std::exp(shifted) / sum_exp;
}

// The backward from the forward output y: the row sums d = sum_k term(y_k, gy_k), then
//   softmax gx = y * (gy - d) with term gy * y,   log-softmax gx = gy - exp(y) * d with term gy.
template <class C>
CNN_HD C softmax_backward_term(C y, C gy, bool log) {
  return log ? gy : gy * y;
}

template <class C>
CNN_HD C softmax_input_grad(C y, C gy, C row_sum, bool log) {
  return log ? gy - std::exp(y) * row_sum : y * (gy - row_sum);
}

}  // namespace cnn
