// The row formulas of the cross-entropy, shared by the CPU and CUDA kernels. A row of logits x is
// reduced in CrossEntropyAcc (double, for every dtype: the rows are short and the loss is what the
// training run reports): m = max_k x_k, lse = m + log(sum_k exp(x_k - m)), logp_k = x_k - lse, and
// loss = -sum_k q_k logp_k; the backward is glogits_k = (exp(logp_k) - q_k) * gloss * scale.
#pragma once
#include <cmath>
#include <cstdint>

#include "kernels/common/host_device.h"
#include "kernels/common/softmax_math.h"
#include "kernels/softmax.h"

namespace cnn {

using CrossEntropyAcc = double;

// Target probability q[r, k]: the soft target, or the label with smoothing.
template <class A>
CNN_HD A cross_entropy_target(const kernels::CrossEntropyTargets& t, int64_t r, int64_t k, int64_t cols) {
  if (t.soft) return static_cast<const A*>(t.soft)[r * cols + k];
  const A on = t.labels[r] == k ? A(1) : A(0);
  return (A(1) - A(t.smoothing)) * on + A(t.smoothing) / static_cast<A>(cols);
}

// lse of the row from its maximum and its sum of exp_shifted terms.
CNN_HD CrossEntropyAcc cross_entropy_log_sum_exp(CrossEntropyAcc row_max, CrossEntropyAcc sum_exp) {
  return row_max + std::log(sum_exp);
}

// The loss term q_k logp_k (the row loss is minus their sum).
template <class A>
CNN_HD CrossEntropyAcc cross_entropy_loss_term(A q, CrossEntropyAcc logp) {
  return static_cast<CrossEntropyAcc>(q) * logp;
}

// The gradient reaching logit k from the kept log-probability, the target and g = gloss * scale.
template <class A>
CNN_HD A cross_entropy_logit_grad(A logp, A q, CrossEntropyAcc g) {
  return static_cast<A>((std::exp(static_cast<CrossEntropyAcc>(logp)) - static_cast<CrossEntropyAcc>(q)) * g);
}

}  // namespace cnn
