// Epoch plans: permutation, sharding, batching.
#include "data/sampler.h"

#include <algorithm>
#include <numeric>
#include <utility>

#include "engine/error.h"
#include "kernels/augment.h"

namespace cnn::data {

std::vector<int64_t> epoch_permutation(int64_t n, uint64_t seed, int64_t epoch) {
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), int64_t{0});
  SampleRng rng(seed, static_cast<uint64_t>(epoch), 0, RngPurpose::shuffle);
  for (int64_t i = n - 1; i > 0; --i) std::swap(order[static_cast<size_t>(i)], order[static_cast<size_t>(rng.integer(0, i))]);
  return order;
}

EpochPlan::EpochPlan(int64_t dataset_size, int64_t epoch, const SamplerOptions& o, int64_t skip)
    : epoch_(epoch), batch_size_(o.batch_size), skip_(skip) {
  CNN_CHECK(o.batch_size > 0, "batch size ", o.batch_size, " must be positive");
  CNN_CHECK(o.world_size > 0 && o.rank >= 0 && o.rank < o.world_size, "rank ", o.rank, " of world size ", o.world_size,
            " is invalid; ranks run from 0 to world_size - 1");
  CNN_CHECK(epoch >= 0, "epoch ", epoch, " must not be negative");
  CNN_CHECK(skip >= 0, "the samples to skip (", skip, ") must not be negative");
  std::vector<int64_t> order;
  if (o.shuffle) {
    order = epoch_permutation(dataset_size, o.seed, epoch);
  } else {
    order.resize(static_cast<size_t>(dataset_size));
    std::iota(order.begin(), order.end(), int64_t{0});
  }
  const int64_t world = o.world_size;
  if (o.drop_last) {
    order.resize(static_cast<size_t>(dataset_size / world * world));
  } else if (o.pad_shards && dataset_size > 0) {
    const int64_t total = (dataset_size + world - 1) / world * world;
    for (int64_t i = dataset_size; i < total; ++i) order.push_back(order[static_cast<size_t>(i % dataset_size)]);
  }
  const auto first = static_cast<size_t>(std::min<int64_t>(skip, static_cast<int64_t>(order.size())));
  for (size_t i = first + static_cast<size_t>(o.rank); i < order.size(); i += static_cast<size_t>(world))
    indices_.push_back(order[i]);
  const auto len = static_cast<int64_t>(indices_.size());
  num_batches_ = o.drop_last ? len / batch_size_ : (len + batch_size_ - 1) / batch_size_;
}

int64_t EpochPlan::batch_count(int64_t k) const {
  return std::min(batch_size_, static_cast<int64_t>(indices_.size()) - k * batch_size_);
}

int64_t EpochPlan::num_samples() const {
  return num_batches_ == 0 ? 0 : batch_begin(num_batches_ - 1) + batch_count(num_batches_ - 1);
}

}  // namespace cnn::data
