// The cross-rank parts of SyncBN (batch_norm2d with a communicator): per-channel batch statistics
// of the global batch from each rank's local ones, and the all-reduce of the backward's per-channel
// sums between its two passes. Ranks may hold batches of different sizes.
//
// Statistics combine exactly as Chan et al.'s parallel variance: with n_r values of mean m_r and
// biased variance v_r on rank r, N = sum n_r, mean = sum n_r m_r / N and
// var = (sum n_r v_r + sum n_r (m_r - mean)^2) / N. Two all-reduces (2C values, then C), no sums
// of squares of raw values, so no cancellation when the mean is large. The backward all-reduces 2C.
#pragma once
#include "engine/distributed/communicator.h"
#include "engine/tensor.h"

namespace cnn::distributed {

struct GlobalBatchStats {
  Tensor mean, var;  // [C] of the global batch (biased variance)
  Tensor count;      // [C], every element N (a tensor so that nothing waits for the device)
};

// From this rank's mean and biased var of `local_count` values per channel.
GlobalBatchStats combine_batch_stats(Communicator& comm, const Tensor& mean, const Tensor& var, int64_t local_count);

// The backward's per-channel sums (sum dz, sum dz * xhat) of the global batch, scaled by
// local_count / N so that the backward input kernel, which divides by its local count, divides by
// N: in place.
void reduce_backward_sums(Communicator& comm, Tensor& sum_dz, Tensor& sum_dz_xhat, const Tensor& count, int64_t local_count);

}  // namespace cnn::distributed
