// Data-parallel gradient averaging the way PyTorch's DDP reducer does it: the parameters are split
// into buckets of about [distributed] bucket_mb, in reverse registration order (the order backward
// produces their gradients in); the tape's gradient-ready hook copies each final gradient into its
// bucket, and a bucket's all-reduce (average over ranks) starts as soon as its last gradient is in,
// while backward goes on. finish() waits for them all and writes the averages back into .grad.
// Buckets start strictly in bucket order, so every rank issues the same collectives in the same
// order whatever the order its gradients came in.
//
// Gradient accumulation: only the last micro-batch of a step attaches the reducer to its tape
// (DDP's no_sync for the others); its .grad already holds the earlier micro-batches' sums.
#pragma once
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "engine/distributed/communicator.h"
#include "engine/tape.h"

namespace cnn::train {

class GradientReducer {
 public:
  // `parameters` in registration order (Module::parameters()); those that do not require
  // gradients are left out.
  GradientReducer(distributed::Communicator& comm, const std::vector<Tensor>& parameters, double bucket_bytes);

  // Makes `tape`'s backward report final gradients to this reducer (call before tape.backward).
  void attach(Tape& tape);
  // After the backward of an attached tape: starts the buckets not started yet (a parameter no
  // record reached counts as a zero gradient), waits for every bucket and writes the averaged
  // gradients into .grad. Does nothing when no tape was attached since the last finish.
  void finish();

  struct Bucket {
    std::vector<size_t> members;   // indices into the parameters, in the order they are packed
    std::vector<int64_t> offsets;  // element offset of each member in `flat`
    int64_t numel = 0;
    DType dtype = DType::f32;
    Tensor flat;                    // the packed gradients, allocated on first use
    size_t ready = 0;               // members reported in this backward
    distributed::Pending pending;   // the all-reduce in flight
  };
  const std::vector<Bucket>& buckets() const { return buckets_; }
  // Gradient-ready reports in the last attached backward (each parameter with a gradient, once).
  int64_t reports() const { return reports_; }

 private:
  void on_ready(const Tensor& leaf);
  void start_ready_buckets();  // in bucket order, as far as complete buckets go
  void start(Bucket& bucket);

  distributed::Communicator& comm_;
  std::vector<Tensor> parameters_;
  std::vector<bool> reported_;
  std::unordered_map<uint64_t, size_t> index_of_;  // Tensor::id() -> parameter index
  std::vector<size_t> bucket_of_, slot_of_;         // per parameter: its bucket and place there
  std::vector<Bucket> buckets_;
  size_t next_to_start_ = 0;
  bool attached_ = false;
  int64_t reports_ = 0;
};

}  // namespace cnn::train
