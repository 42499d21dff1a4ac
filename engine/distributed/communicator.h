// Collective communication between the processes (ranks) of a data-parallel job: one interface,
// three backends.
//   - single: one process, world size 1; every collective is the identity (or a copy).
//   - mpi:    host tensors over OpenMPI (also the bootstrap of the NCCL backend under mpirun/srun).
//   - nccl:   CUDA tensors over NCCL, on a dedicated communication stream ordered against the
//             device's compute stream by events.
// A communicator takes tensors of one device (device()); a collective on a tensor of another device,
// of a dtype it cannot carry, or of a size that differs between ranks where sizes must match, is a
// cnn::Error naming the collective. Every collective is bounded by the communicator's timeout: a
// rank that waits longer than that for the others reports which collective hung and ends the job.
//
//   auto comm = cnn::distributed::connect(cnn::distributed::detect_world(), Device::cpu());
//   comm->all_reduce(gradient, ReduceOp::average);   // in place, on every rank
//
// Lives in engine/ (not train/) because the engine's SyncBN (batch_norm2d with a communicator)
// reduces its statistics through it, and the NCCL backend orders itself against the engine's streams.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "engine/device.h"
#include "engine/distributed/world.h"
#include "engine/tensor.h"

namespace cnn::distributed {

enum class ReduceOp { sum, average, max };
const char* reduce_op_name(ReduceOp op);

// A collective in flight. wait() returns once the result may be used by the caller's next work: on
// the host for MPI (it blocks until the data has arrived), on the compute stream for NCCL (the stream
// waits for the communication stream; the host does not block). Waiting twice is harmless;
// destroying an unwaited one waits for it.
class PendingCollective {
 public:
  virtual ~PendingCollective() = default;
  virtual void wait() = 0;
  // Lets the collective advance without waiting for it. MPI moves non-blocking collectives on only
  // inside MPI calls; the gradient buckets poll theirs while backward goes on. NCCL needs nothing.
  virtual void poll() {}
};
using Pending = std::unique_ptr<PendingCollective>;

class Communicator {
 public:
  explicit Communicator(World world);
  virtual ~Communicator() = default;
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  const World& world() const { return world_; }
  int rank() const { return world_.rank; }
  int world_size() const { return world_.world_size; }
  int local_rank() const { return world_.local_rank; }

  virtual const char* backend() const = 0;  // "single", "mpi" or "nccl"
  virtual Device device() const = 0;        // where its tensors live

  // In place on every rank: t = op over the ranks' t (average = sum / world size). f32, f16, bf16,
  // f64 and i64 (i32 and u8 too where the backend carries them); same shape on every rank.
  void all_reduce(const Tensor& t, ReduceOp op) { all_reduce_async(t, op)->wait(); }
  Pending all_reduce_async(const Tensor& t, ReduceOp op);
  // Rank `root`'s t into every rank's t (same shape and dtype everywhere).
  void broadcast(const Tensor& t, int root);
  // [world_size, ...t.shape]: every rank's t, in rank order (same shape on every rank).
  Tensor all_gather(const Tensor& t);
  virtual void barrier() = 0;

  // Checked collectives (like TORCH_DISTRIBUTED_DEBUG=DETAIL): before each collective the ranks
  // compare what they are about to do (which collective, op or root, dtype, shape) with one small
  // all-gather, and a mismatch is a cnn::Error on every rank that names the ranks and what each
  // passed, instead of a hang or garbage. Costs a collective per collective: for debugging. On when
  // the environment sets CNN_DISTRIBUTED_DEBUG=1, or by set_checked.
  void set_checked(bool on) { checked_ = on; }
  bool checked() const { return checked_; }
  // Ends the whole job now, from any rank, with `why` on standard error (the others exit non-zero
  // too). For a rank that cannot go on: the others would otherwise wait for it until the timeout.
  [[noreturn]] virtual void abort(const std::string& why) noexcept = 0;

  double timeout_seconds() const { return timeout_seconds_; }
  void set_timeout_seconds(double seconds) { timeout_seconds_ = seconds; }

 protected:
  // Refuses a tensor that is undefined, on another device, or of a dtype this backend cannot carry.
  void check_tensor(const char* collective, const Tensor& t, bool integers_allowed = true) const;

  // The backends' collectives, called by the public ones above.
  virtual Pending start_all_reduce(const Tensor& t, ReduceOp op) = 0;
  virtual void run_broadcast(const Tensor& t, int root) = 0;
  virtual Tensor run_all_gather(const Tensor& t) = 0;

 private:
  // Checked collectives: the same call on every rank, or a cnn::Error.
  void verify_same_call(const char* collective, const Tensor& t, int64_t argument);

  World world_;
  double timeout_seconds_ = 300;
  bool checked_ = false;
};

using CommunicatorPtr = std::shared_ptr<Communicator>;

// One process, world size 1, on `device`.
CommunicatorPtr make_single_communicator(Device device = Device::cpu());

// The communicator of this job for tensors on `device`: single when world.world_size == 1; for CPU
// tensors MPI; for CUDA tensors NCCL, its id shared over MPI under mpirun/srun or over the TCP
// rendezvous (rendezvous.h) under a torchrun-style launch. A cnn::Error that says what to install or
// how to launch when this build lacks the backend the job needs.
CommunicatorPtr connect(const World& world, Device device, double timeout_seconds = 300);

// Host-side conveniences over a communicator of any device: a value reduced across ranks, several
// at once (one collective), and rank `root`'s text on every rank.
double all_reduce_value(Communicator& comm, double value, ReduceOp op);
std::vector<double> all_reduce_values(Communicator& comm, const std::vector<double>& values, ReduceOp op);
std::string broadcast_text(Communicator& comm, const std::string& text, int root = 0);

}  // namespace cnn::distributed
