// The data-parallel side of a training run (see data_parallel.h).
#include "train/distributed/data_parallel.h"

#include <cstdint>
#include <sstream>

#include "engine/error.h"
#include "engine/names_in_words.h"
#include "engine/ops.h"
#include "layers/batch_norm.h"
#include "train/run_log.h"
#include "train/train_settings.h"

namespace cnn::train {

namespace {
// FNV-1a: a fingerprint to compare across ranks, not a checksum against tampering.
int64_t fingerprint_hash(const std::string& text) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : text) h = (h ^ c) * 1099511628211ull;
  return static_cast<int64_t>(h);
}
}  // namespace

DataParallel::DataParallel(const TrainSettings& settings)
    : comm_(distributed::connect(settings.distributed.world, settings.compute.device, settings.distributed.timeout_seconds)) {}

void DataParallel::prepare(Module& model, const TrainSettings& settings, RunLog& log) {
  if (!active()) return;
  std::ostringstream shapes;
  for (const NamedParameter& p : model.named_parameters()) shapes << p.name << describe(p.tensor) << ";";
  check_same_on_every_rank(*comm_, settings.resolved_ini, "config (with --set overrides)");
  check_same_on_every_rank(*comm_, shapes.str(), "model (parameter names and shapes)");
  if (settings.model.sync_bn) {
    const int layers = sync_batch_norm(model, comm_);
    log.info("SyncBN: " + std::to_string(layers) + " BatchNorm layers normalise over the global batch");
  }
  broadcast_model(*comm_, model);
  reducer_ = std::make_unique<GradientReducer>(*comm_, model.parameters(), settings.distributed.bucket_bytes);
  const size_t buckets = reducer_->buckets().size();
  log.info("data-parallel: " + std::to_string(comm_->world_size()) + " ranks over " + comm_->backend() + ", gradients in " +
           std::to_string(buckets) + (buckets == 1 ? " bucket" : " buckets") + " of up to " +
           std::to_string(static_cast<int64_t>(settings.distributed.bucket_bytes / (1 << 20))) + " MiB");
}

Tensor DataParallel::agree(const Tensor& measured) {
  if (!active()) return measured;
  // The gradients were averaged, so the sums of squares agree already; the maximum of the inf/nan
  // counts makes every rank skip together. In place, on the communicator's device: no host read.
  comm_->all_reduce(measured, distributed::ReduceOp::max);
  return measured;
}

void broadcast_model(distributed::Communicator& comm, Module& model) {
  NoGrad no_grad;
  for (const Tensor& p : model.parameters()) comm.broadcast(p, 0);
  for (const NamedTensor& b : model.named_buffers()) comm.broadcast(b.tensor, 0);
  model.refresh_low_precision_copies();
}

void check_same_on_every_rank(distributed::Communicator& comm, const std::string& fingerprint, const std::string& what) {
  if (comm.world_size() == 1) return;
  const Tensor mine = Tensor::full({1}, 0.0, DType::i64, Device::cpu());
  mine.data_as<int64_t>()[0] = fingerprint_hash(fingerprint);
  const Tensor all = comm.all_gather(mine.to(comm.device())).to(Device::cpu());
  const int64_t* hashes = all.data_as<int64_t>();
  std::string differing;
  for (int r = 1; r < comm.world_size(); ++r)
    if (hashes[r] != hashes[0]) differing += (differing.empty() ? "" : ", ") + std::to_string(r);
  CNN_CHECK(differing.empty(), "the ranks were not given the same ", what, ": rank(s) ", differing, " differ from rank 0; ",
            "launch every rank with the same config file and the same --set options");
}

void check_same_data_on_every_rank(distributed::Communicator& comm, const data::Dataset& dataset, const std::string& spec) {
  if (comm.world_size() == 1) return;
  std::string files;
  for (int64_t i = 0; i < dataset.size(); ++i) files += dataset.source(i) + '\n';
  std::ostringstream mine;
  mine << dataset.size() << " images, " << dataset.num_classes() << " classes [" << names_in_words(dataset.class_names()) << "], file list fingerprint "
       << std::hex << static_cast<uint64_t>(fingerprint_hash(files));
  const std::string first = distributed::broadcast_text(comm, mine.str());
  const std::string reason = "the ranks do not see the same data at " + spec + ": rank 0 sees " + first +
                             (mine.str() == first ? "" : "; rank " + std::to_string(comm.rank()) + " sees " + mine.str());
  // Every rank learns whether all agree (one collective), so that every rank stops.
  try {
    check_same_on_every_rank(comm, mine.str(), "data");
  } catch (const Error&) {
    throw Error(reason + "; start every rank in the same folder, or give absolute paths");
  }
}

}  // namespace cnn::train
