// The MPI backend: host tensors over MPI_COMM_WORLD with OpenMPI's non-blocking collectives
// (MPI_Iallreduce, MPI_Ibcast, MPI_Iallgather, MPI_Ibarrier). Every wait polls MPI_Test against the
// communicator's deadline instead of blocking in MPI_Wait, so a rank that never arrives turns into a
// message naming this rank and the collective, then MPI_Abort, which ends the whole job (mpirun
// takes the other ranks down). MPI has no 16-bit float types: f16/bf16 tensors are reduced through
// an f32 copy (one rounding, at the end).
#include "engine/config.h"

#if CNN_WITH_MPI
// The C API only: OpenMPI's (deprecated) C++ bindings would otherwise come along with mpi.h.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <chrono>
#include <limits>
#include <cstdio>
#include <mutex>
#include <optional>
#include <thread>

#include "engine/distributed/backends.h"
#include "engine/error.h"
#include "engine/ops.h"
#include "engine/tape.h"

namespace cnn::distributed {

namespace {
using Clock = std::chrono::steady_clock;

void check_mpi(int code, const char* what) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  CNN_FAIL("MPI ", what, " failed: ", std::string(text, static_cast<size_t>(length)));
}

// MPI is started on first use and finished when the process exits normally; errors come back as
// return codes (turned into cnn::Error) instead of MPI's default of aborting without a word.
class MpiRuntime {
 public:
  static void ensure_started() { static MpiRuntime runtime; }
  ~MpiRuntime() {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Finalize();
  }

 private:
  MpiRuntime() {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized) {
      int provided = 0;
      // Only the training thread calls MPI, but not always the thread that started it.
      check_mpi(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided), "initialisation");
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  }
};

MPI_Datatype mpi_type(DType dt) {
  switch (dt) {
    case DType::f32: return MPI_FLOAT;
    case DType::f64: return MPI_DOUBLE;
    case DType::i64: return MPI_INT64_T;
    case DType::i32: return MPI_INT32_T;
    case DType::u8: return MPI_UINT8_T;
    default: CNN_FAIL("MPI has no datatype for ", dtype_name(dt));
  }
}

// MPI counts are ints: larger tensors are refused rather than cut.
int mpi_count(int64_t count, const char* what) {
  CNN_CHECK(count <= std::numeric_limits<int>::max(), "MPI ", what, " of ", count, " elements (or bytes): MPI counts stop at ",
            std::numeric_limits<int>::max(), "; split the tensor");
  return static_cast<int>(count);
}

MPI_Op mpi_op(ReduceOp op) { return op == ReduceOp::max ? MPI_MAX : MPI_SUM; }

[[noreturn]] void abort_job(int rank, const std::string& why) {
  std::fprintf(stderr, "cnn distributed: rank %d: %s\n", rank, why.c_str());
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::_Exit(1);  // MPI_Abort does not return; this is for the compiler
}

// Polls `request` until it completes or the deadline passes (then the job is ended with a message).
void wait_bounded(MPI_Request& request, int rank, const std::string& what, double timeout_seconds) {
  const Clock::time_point deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                                        std::chrono::duration<double>(timeout_seconds));
  for (int polls = 0;; ++polls) {
    int done = 0;
    check_mpi(MPI_Test(&request, &done, MPI_STATUS_IGNORE), what.c_str());
    if (done) return;
    if (Clock::now() > deadline)
      abort_job(rank, what + " did not finish within " + std::to_string(static_cast<int>(timeout_seconds)) +
                          " s ([distributed] timeout_s): another rank did not reach it (it failed, hung or ran a different "
                          "number of steps; its own message, if any, is above). Ending the job.");
    // Spin for the short collectives of a training step, then back off so a long wait costs no core.
    if (polls > 2000) std::this_thread::sleep_for(std::chrono::microseconds(polls > 20000 ? 1000 : 50));
  }
}

// An MPI_Iallreduce in flight. f16/bf16 go through an f32 copy; `average` divides after the sum.
class MpiPendingReduce final : public PendingCollective {
 public:
  MpiPendingReduce(Tensor target, Tensor buffer, ReduceOp op, int rank, int world_size, std::string what, double timeout)
      : target_(std::move(target)), buffer_(std::move(buffer)), op_(op), rank_(rank), world_size_(world_size),
        what_(std::move(what)), timeout_(timeout) {
    check_mpi(MPI_Iallreduce(MPI_IN_PLACE, buffer_.data(), mpi_count(buffer_.numel(), "all_reduce"), mpi_type(buffer_.dtype()),
                             mpi_op(op), MPI_COMM_WORLD, &request_),
              what_.c_str());
  }
  ~MpiPendingReduce() override {
    try {
      wait();
    } catch (...) {  // an error was reported by the first wait; nothing more to say here
    }
  }
  void poll() override {
    if (waited_ || done_) return;
    check_mpi(MPI_Test(&request_, &done_, MPI_STATUS_IGNORE), what_.c_str());
  }
  void wait() override {
    if (waited_) return;
    waited_ = true;
    if (!done_) wait_bounded(request_, rank_, what_, timeout_);
    NoGrad no_grad;
    if (op_ == ReduceOp::average) buffer_.copy_(scale(buffer_, 1.0 / world_size_));
    if (buffer_.impl() != target_.impl()) target_.copy_(buffer_.to(target_.dtype()));
  }

 private:
  Tensor target_, buffer_;
  ReduceOp op_;
  int rank_, world_size_;
  std::string what_;
  double timeout_;
  MPI_Request request_ = MPI_REQUEST_NULL;
  int done_ = 0;  // MPI_Test saw it complete
  bool waited_ = false;
};

class MpiCommunicator final : public Communicator {
 public:
  explicit MpiCommunicator(const World& world) : Communicator(world) {
    int rank = -1, size = -1;
    check_mpi(MPI_Comm_rank(MPI_COMM_WORLD, &rank), "rank query");
    check_mpi(MPI_Comm_size(MPI_COMM_WORLD, &size), "size query");
    CNN_CHECK(rank == world.rank && size == world.world_size, "MPI says this is rank ", rank, " of ", size, " but the launcher's "
              "environment says ", world.str(), "; launch with one mpirun (or srun) and do not set RANK/WORLD_SIZE by hand");
  }
  const char* backend() const override { return "mpi"; }
  Device device() const override { return Device::cpu(); }

  Pending start_all_reduce(const Tensor& t, ReduceOp op) override {
    check_tensor("all_reduce", t);
    const bool integer = !is_floating(t.dtype());
    CNN_CHECK(!(integer && op == ReduceOp::average), "mpi all_reduce: average of the integer tensor ", describe(t),
              " would truncate; reduce with sum and divide where the rounding is wanted");
    const bool half_width = t.dtype() == DType::f16 || t.dtype() == DType::bf16;
    Tensor buffer = half_width ? t.to(DType::f32) : t;
    return std::make_unique<MpiPendingReduce>(t, buffer, op, rank(), world_size(), describe_collective("all_reduce", t, op),
                                              timeout_seconds());
  }

  void run_broadcast(const Tensor& t, int root) override {
    check_tensor("broadcast", t);
    CNN_CHECK(root >= 0 && root < world_size(), "broadcast from rank ", root, " in a world of ", world_size(), " ranks");
    MPI_Request request = MPI_REQUEST_NULL;
    const std::string what = describe_collective("broadcast", t);
    check_mpi(MPI_Ibcast(t.data(), mpi_count(static_cast<int64_t>(t.nbytes()), "broadcast"), MPI_BYTE, root, MPI_COMM_WORLD, &request), what.c_str());
    wait_bounded(request, rank(), what, timeout_seconds());
  }

  Tensor run_all_gather(const Tensor& t) override {
    check_tensor("all_gather", t);
    std::vector<int64_t> dims{world_size()};
    for (int i = 0; i < t.dim(); ++i) dims.push_back(t.size(i));
    Tensor out = Tensor::empty(Shape(dims), t.dtype(), Device::cpu());
    MPI_Request request = MPI_REQUEST_NULL;
    const std::string what = describe_collective("all_gather", t);
    const int bytes = mpi_count(static_cast<int64_t>(t.nbytes()) * world_size(), "all_gather") / world_size();
    check_mpi(MPI_Iallgather(t.data(), bytes, MPI_BYTE, out.data(), bytes, MPI_BYTE, MPI_COMM_WORLD, &request), what.c_str());
    wait_bounded(request, rank(), what, timeout_seconds());
    return out;
  }

  void barrier() override {
    MPI_Request request = MPI_REQUEST_NULL;
    check_mpi(MPI_Ibarrier(MPI_COMM_WORLD, &request), "barrier");
    wait_bounded(request, rank(), "MPI barrier", timeout_seconds());
  }

  [[noreturn]] void abort(const std::string& why) noexcept override { abort_job(rank(), why); }

 private:
  static std::string describe_collective(const char* name, const Tensor& t, std::optional<ReduceOp> op = {}) {
    std::string text = std::string("MPI ") + name;
    if (op) text += std::string(" (") + reduce_op_name(*op) + ")";
    return text + " of " + describe(t);
  }
};
}  // namespace

CommunicatorPtr make_mpi_communicator(const World& world, double timeout_seconds) {
  MpiRuntime::ensure_started();
  auto comm = std::make_shared<MpiCommunicator>(world);
  comm->set_timeout_seconds(timeout_seconds);
  return comm;
}

std::string mpi_broadcast_bytes(const std::string& bytes, int root, double timeout_seconds) {
  MpiRuntime::ensure_started();
  int rank = 0;
  check_mpi(MPI_Comm_rank(MPI_COMM_WORLD, &rank), "rank query");
  int64_t length = static_cast<int64_t>(bytes.size());
  MPI_Request request = MPI_REQUEST_NULL;
  check_mpi(MPI_Ibcast(&length, 1, MPI_INT64_T, root, MPI_COMM_WORLD, &request), "broadcast of the NCCL id");
  wait_bounded(request, rank, "MPI broadcast of the NCCL id", timeout_seconds);
  std::string out = rank == root ? bytes : std::string(static_cast<size_t>(length), '\0');
  check_mpi(MPI_Ibcast(out.data(), mpi_count(length, "broadcast of the NCCL id"), MPI_BYTE, root, MPI_COMM_WORLD, &request), "broadcast of the NCCL id");
  wait_bounded(request, rank, "MPI broadcast of the NCCL id", timeout_seconds);
  return out;
}

}  // namespace cnn::distributed
#endif  // CNN_WITH_MPI
