// Which samples an epoch visits, in which order, on which rank: a per-epoch permutation from the
// seed (or the natural order), split across ranks like PyTorch's DistributedSampler with
// set_epoch, then cut into batches. Pure functions of (dataset size, epoch, options): every rank
// and every resumed run computes the same plan without talking to the others.
#pragma once
#include <cstdint>
#include <vector>

namespace cnn::data {

struct SamplerOptions {
  int64_t batch_size = 1;
  bool shuffle = true;
  uint64_t seed = 0;
  int rank = 0, world_size = 1;
  // Drops the samples that would make the shards unequal, and each shard's incomplete last batch.
  bool drop_last = false;
  // Without drop_last: pads the permutation by repeating its start so that every rank gets the same
  // number of samples (DistributedSampler's default; a few samples are seen twice). Off: every
  // sample is visited exactly once per epoch and shards differ in length by at most one.
  bool pad_shards = false;
};

// A permutation of [0, n) drawn with Philox keyed by (seed, epoch): Fisher-Yates.
std::vector<int64_t> epoch_permutation(int64_t n, uint64_t seed, int64_t epoch);

class EpochPlan {
 public:
  // `skip`: samples of the epoch's order (padded or cut for the shards) already used by all ranks
  // together; the shards split the rest. A run resumed on another number of ranks continues the
  // epoch this way: with S ranks of batch B having used b batches each, skip = b * B * S. On the
  // same number of ranks it gives exactly batches b, b+1, ... of the unskipped plan.
  EpochPlan(int64_t dataset_size, int64_t epoch, const SamplerOptions& options, int64_t skip = 0);

  int64_t epoch() const { return epoch_; }
  int64_t skipped() const { return skip_; }
  int64_t num_batches() const { return num_batches_; }
  int64_t num_samples() const;  // in the batches of this rank
  // Dataset indices of batch k: [first, first + count) of indices().
  int64_t batch_begin(int64_t k) const { return k * batch_size_; }
  int64_t batch_count(int64_t k) const;
  const std::vector<int64_t>& indices() const { return indices_; }  // this rank's shard, in order

 private:
  int64_t epoch_, batch_size_, num_batches_, skip_;
  std::vector<int64_t> indices_;
};

}  // namespace cnn::data
