// SyncBN's cross-rank statistics (see sync_batch_norm.h).
#include "engine/distributed/sync_batch_norm.h"

#include "engine/ops.h"
#include "engine/tape.h"

namespace cnn::distributed {

GlobalBatchStats combine_batch_stats(Communicator& comm, const Tensor& mean, const Tensor& var, int64_t local_count) {
  NoGrad no_grad;
  const int64_t c = mean.numel();
  const auto n = static_cast<double>(local_count);
  // sum_r n_r m_r and N, in one all-reduce.
  Tensor first = concat_channels({scale(mean, n), Tensor::full({c}, n, mean.dtype(), mean.device())});
  comm.all_reduce(first, ReduceOp::sum);
  const Tensor count = first.slice(c, 2 * c).clone();
  const Tensor global_mean = div(first.slice(0, c), count);
  // sum_r n_r (v_r + (m_r - mean)^2) = N * var.
  const Tensor deviation = sub(mean, global_mean);
  Tensor second = scale(add(var, mul(deviation, deviation)), n);
  comm.all_reduce(second, ReduceOp::sum);
  return {.mean = global_mean, .var = div(second, count), .count = count};
}

void reduce_backward_sums(Communicator& comm, Tensor& sum_dz, Tensor& sum_dz_xhat, const Tensor& count, int64_t local_count) {
  NoGrad no_grad;
  const int64_t c = sum_dz.numel();
  Tensor both = concat_channels({sum_dz, sum_dz_xhat});
  comm.all_reduce(both, ReduceOp::sum);
  const Tensor ratio = scale(pow(count, -1.0), static_cast<double>(local_count));  // n / N
  sum_dz = mul(both.slice(0, c), ratio);
  sum_dz_xhat = mul(both.slice(c, 2 * c), ratio);
}

}  // namespace cnn::distributed
