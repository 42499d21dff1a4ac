// Bucketed gradient all-reduce overlapped with backward (see gradient_reducer.h).
#include "train/distributed/gradient_reducer.h"

#include "engine/error.h"
#include "engine/ops.h"

namespace cnn::train {

GradientReducer::GradientReducer(distributed::Communicator& comm, const std::vector<Tensor>& parameters, double bucket_bytes)
    : comm_(comm) {
  CNN_CHECK(bucket_bytes > 0, "the gradient bucket size must be positive, got ", bucket_bytes, " bytes");
  for (const Tensor& p : parameters)
    if (p.requires_grad()) parameters_.push_back(p);
  reported_.assign(parameters_.size(), false);
  bucket_of_.assign(parameters_.size(), 0);
  slot_of_.assign(parameters_.size(), 0);
  // Reverse registration order: the head's gradients are final first. A new bucket starts when the
  // next parameter would overflow this one or has another dtype; a parameter larger than a bucket
  // is a bucket of its own.
  for (size_t k = parameters_.size(); k-- > 0;) {
    const Tensor& p = parameters_[k];
    CNN_CHECK(p.device() == comm.device(), "data-parallel training: parameter ", describe(p), " is on ", p.device().str(),
              " but the ", comm.backend(), " communicator carries tensors on ", comm.device().str());
    index_of_[p.id()] = k;
    const bool fits = !buckets_.empty() && buckets_.back().dtype == p.dtype() &&
                      static_cast<double>((buckets_.back().numel + p.numel()) * dtype_size(p.dtype())) <= bucket_bytes;
    if (!fits) {
      buckets_.emplace_back();
      buckets_.back().dtype = p.dtype();
    }
    Bucket& bucket = buckets_.back();
    bucket_of_[k] = buckets_.size() - 1;
    slot_of_[k] = bucket.members.size();
    bucket.members.push_back(k);
    bucket.offsets.push_back(bucket.numel);
    bucket.numel += p.numel();
  }
}

void GradientReducer::attach(Tape& tape) {
  CNN_CHECK(!attached_, "GradientReducer::attach: the previous step's buckets were not finished");
  attached_ = true;
  reports_ = 0;
  next_to_start_ = 0;
  reported_.assign(parameters_.size(), false);
  for (Bucket& bucket : buckets_) bucket.ready = 0;
  tape.set_gradient_ready_hook([this](const Tensor& leaf) { on_ready(leaf); });
}

void GradientReducer::on_ready(const Tensor& leaf) {
  const auto found = index_of_.find(leaf.id());
  if (found == index_of_.end()) return;  // a leaf that is not a parameter (an input that wanted gradients)
  const size_t k = found->second;
  CNN_CHECK(!reported_[k], "the gradient of parameter ", describe(leaf), " was reported final twice in one backward");
  reported_[k] = true;
  ++reports_;
  Bucket& bucket = buckets_[bucket_of_[k]];
  if (!bucket.flat.defined()) bucket.flat = Tensor::empty({bucket.numel}, bucket.dtype, comm_.device());
  const int64_t offset = bucket.offsets[slot_of_[k]];
  NoGrad no_grad;
  Tensor slot = bucket.flat.slice(offset, offset + leaf.numel());
  slot.copy_(leaf.grad().reshape({leaf.numel()}));
  if (++bucket.ready == bucket.members.size()) start_ready_buckets();
  for (size_t b = 0; b < next_to_start_; ++b) buckets_[b].pending->poll();  // MPI: keep the started ones moving
}

void GradientReducer::start_ready_buckets() {
  while (next_to_start_ < buckets_.size() && buckets_[next_to_start_].ready == buckets_[next_to_start_].members.size())
    start(buckets_[next_to_start_++]);
}

void GradientReducer::start(Bucket& bucket) { bucket.pending = comm_.all_reduce_async(bucket.flat, distributed::ReduceOp::average); }

void GradientReducer::finish() {
  if (!attached_) return;
  attached_ = false;
  NoGrad no_grad;
  // Parameters backward did not reach (on this rank) add zeros, so that every rank starts every bucket.
  for (; next_to_start_ < buckets_.size(); ++next_to_start_) {
    Bucket& bucket = buckets_[next_to_start_];
    if (!bucket.flat.defined()) bucket.flat = Tensor::empty({bucket.numel}, bucket.dtype, comm_.device());
    for (size_t j = 0; j < bucket.members.size(); ++j) {
      const size_t k = bucket.members[j];
      if (reported_[k]) continue;
      const Tensor& p = parameters_[k];
      Tensor slot = bucket.flat.slice(bucket.offsets[j], bucket.offsets[j] + p.numel());
      if (p.grad().defined())
        slot.copy_(p.grad().reshape({p.numel()}));  // a gradient from earlier micro-batches only
      else
        slot.zero_();
    }
    start(bucket);
  }
  for (Bucket& bucket : buckets_) {
    bucket.pending->wait();
    bucket.pending.reset();
    for (size_t j = 0; j < bucket.members.size(); ++j) {
      const Tensor& p = parameters_[bucket.members[j]];
      const Tensor average = bucket.flat.slice(bucket.offsets[j], bucket.offsets[j] + p.numel()).reshape(p.shape());
      // A parameter without a gradient here had none on every rank (the same model and graph run
      // everywhere): it stays without one, as in a single process.
      if (p.grad().defined()) p.grad().copy_(average);
    }
  }
}

}  // namespace cnn::train
