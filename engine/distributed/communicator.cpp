// The backend-independent part of the communicators: argument checks, the single-process backend,
// and connect(), which picks the backend a job needs and shares the NCCL id.
#include "engine/distributed/communicator.h"

#include <cstdio>
#include <algorithm>
#include <cstdlib>
#include <string>

#include "engine/config.h"
#include "engine/distributed/backends.h"
#include "engine/distributed/rendezvous.h"
#include "engine/error.h"

namespace cnn::distributed {

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return "sum";
    case ReduceOp::average: return "average";
    case ReduceOp::max: return "max";
  }
  return "?";
}

Communicator::Communicator(World world) : world_(std::move(world)) {
  const char* debug = std::getenv("CNN_DISTRIBUTED_DEBUG");
  checked_ = debug != nullptr && std::string(debug) != "0" && *debug != '\0';
}

Pending Communicator::all_reduce_async(const Tensor& t, ReduceOp op) {
  verify_same_call("all_reduce", t, static_cast<int64_t>(op));
  return start_all_reduce(t, op);
}

void Communicator::broadcast(const Tensor& t, int root) {
  verify_same_call("broadcast", t, root);
  run_broadcast(t, root);
}

Tensor Communicator::all_gather(const Tensor& t) {
  verify_same_call("all_gather", t, 0);
  return run_all_gather(t);
}

namespace {
// What a checked collective compares across ranks: collective, argument (op or root), dtype, rank
// (number of dimensions), then the dimensions.
constexpr int kCallFields = 4 + Shape::kMaxDims;

std::string describe_call(const int64_t* call) {
  static const char* const names[] = {"all_reduce", "broadcast", "all_gather"};
  std::string text = names[call[0]];
  if (call[0] == 0) text += std::string(" (") + reduce_op_name(static_cast<ReduceOp>(call[1])) + ")";
  if (call[0] == 1) text += " from rank " + std::to_string(call[1]);
  text += std::string(" of ") + dtype_name(static_cast<DType>(call[2])) + " [";
  for (int d = 0; d < call[3]; ++d) {
    if (d) text += ",";
    text += std::to_string(call[4 + d]);
  }
  return text + "]";
}
}  // namespace

void Communicator::verify_same_call(const char* collective, const Tensor& t, int64_t argument) {
  if (!checked_ || world_size() == 1 || !t.defined()) return;
  const std::string name = collective;
  Tensor call = Tensor::zeros({kCallFields}, DType::i64, Device::cpu());
  int64_t* fields = call.data_as<int64_t>();
  fields[0] = name == "all_reduce" ? 0 : name == "broadcast" ? 1 : 2;
  fields[1] = argument;
  fields[2] = static_cast<int64_t>(t.dtype());
  fields[3] = t.dim();
  for (int d = 0; d < t.dim(); ++d) fields[4 + d] = t.size(d);
  const Tensor all = run_all_gather(call.to(device())).to(Device::cpu());
  const int64_t* calls = all.data_as<int64_t>();
  std::string differing;
  for (int r = 1; r < world_size(); ++r)
    if (!std::equal(calls, calls + kCallFields, calls + r * kCallFields))
      differing += detail::concat("; rank ", r, ": ", describe_call(calls + r * kCallFields));
  CNN_CHECK(differing.empty(), "checked collectives (CNN_DISTRIBUTED_DEBUG): the ranks called different collectives: rank 0: ",
            describe_call(calls), differing, ". Every rank must issue the same collectives with the same shapes in the same order");
}

void Communicator::check_tensor(const char* collective, const Tensor& t, bool integers_allowed) const {
  CNN_CHECK(t.defined(), backend(), " ", collective, ": the tensor is undefined");
  CNN_CHECK(t.device() == device(), backend(), " ", collective, ": the tensor ", describe(t), " is on ", t.device().str(),
            " but this communicator carries tensors on ", device().str(),
            device().is_cpu() ? " (MPI takes host tensors; copy it with .to(Device::cpu()))"
                              : " (NCCL takes tensors of its own GPU)");
  const DType dt = t.dtype();
  const bool floating = dt == DType::f32 || dt == DType::f64 || dt == DType::f16 || dt == DType::bf16;
  const bool integer = dt == DType::i64 || dt == DType::i32 || dt == DType::u8;
  CNN_CHECK(floating || (integers_allowed && integer), backend(), " ", collective, ": dtype ", dtype_name(dt),
            " is not supported here (f32, f64, f16, bf16", integers_allowed ? ", i64, i32, u8" : "", ")");
}

namespace {
struct Done final : PendingCollective {
  void wait() override {}
};

class SingleCommunicator final : public Communicator {
 public:
  explicit SingleCommunicator(Device device) : Communicator(World{}), device_(device) {}
  const char* backend() const override { return "single"; }
  Device device() const override { return device_; }
  Pending start_all_reduce(const Tensor& t, ReduceOp) override {
    check_tensor("all_reduce", t);
    return std::make_unique<Done>();  // one rank: sum, average and max are all the identity
  }
  void run_broadcast(const Tensor& t, int root) override {
    check_tensor("broadcast", t);
    CNN_CHECK(root == 0, "broadcast from rank ", root, " in a world of 1 rank");
  }
  Tensor run_all_gather(const Tensor& t) override {
    check_tensor("all_gather", t);
    std::vector<int64_t> dims{1};
    for (int i = 0; i < t.dim(); ++i) dims.push_back(t.size(i));
    return t.clone().reshape(Shape(dims));
  }
  void barrier() override {}
  [[noreturn]] void abort(const std::string& why) noexcept override {
    std::fprintf(stderr, "cnn distributed: %s\n", why.c_str());
    std::fflush(stderr);
    std::_Exit(1);
  }

 private:
  Device device_;
};

[[maybe_unused]] std::string share_nccl_id([[maybe_unused]] const World& world, [[maybe_unused]] double timeout_seconds) {
#if CNN_WITH_NCCL
  const std::string id = world.is_main() ? nccl_unique_id() : std::string();
#if CNN_WITH_MPI
  if (world.under_mpi()) return mpi_broadcast_bytes(id, 0, timeout_seconds);
#endif
  CNN_CHECK(world.launcher == Launcher::torchrun, "the NCCL id is shared over MPI (under mpirun or srun) or over the "
            "torchrun-style rendezvous (MASTER_ADDR, MASTER_PORT), but this build has no MPI and the job was launched by ",
            launcher_name(world.launcher));
  return rendezvous_broadcast(world, id, timeout_seconds);
#else
  return {};
#endif
}
}  // namespace

CommunicatorPtr make_single_communicator(Device device) { return std::make_shared<SingleCommunicator>(device); }

CommunicatorPtr connect(const World& world, Device device, double timeout_seconds) {
  CNN_CHECK(timeout_seconds > 0, "the distributed timeout must be positive, got ", timeout_seconds, " s");
  if (!world.distributed()) return make_single_communicator(device);
  CommunicatorPtr comm;
  if (device.is_cpu()) {
    CNN_CHECK(world.under_mpi(), "data-parallel training on the CPU runs over MPI: launch it with mpirun -np N (or srun); "
              "a torchrun-style launch (", world.str(), ") carries NCCL only, for device = cuda");
#if CNN_WITH_MPI
    comm = make_mpi_communicator(world, timeout_seconds);
#else
    CNN_FAIL("this job has ", world.world_size, " ranks on the CPU, but cnn was built without MPI; install libopenmpi-dev "
             "(scripts/setup.sh does) and rebuild");
#endif
  } else {
#if CNN_WITH_NCCL
    comm = make_nccl_communicator(world, device.index, share_nccl_id(world, timeout_seconds), timeout_seconds);
#else
    CNN_FAIL("this job has ", world.world_size, " ranks on CUDA devices, but cnn was built without NCCL (it ships with the "
             "CUDA toolkit; check that CMake found nccl.h and libnccl) ");
#endif
  }
  comm->set_timeout_seconds(timeout_seconds);
  return comm;
}

double all_reduce_value(Communicator& comm, double value, ReduceOp op) { return all_reduce_values(comm, {value}, op)[0]; }

std::vector<double> all_reduce_values(Communicator& comm, const std::vector<double>& values, ReduceOp op) {
  if (comm.world_size() == 1 || values.empty()) return values;
  const Tensor t = Tensor::from_vector(values, {static_cast<int64_t>(values.size())}).to(comm.device());
  comm.all_reduce(t, op);
  return t.to_doubles();
}

std::string broadcast_text(Communicator& comm, const std::string& text, int root) {
  if (comm.world_size() == 1) return text;
  const Tensor length = Tensor::full({1}, static_cast<double>(text.size()), DType::i64, comm.device());
  comm.broadcast(length, root);
  const auto n = static_cast<int64_t>(length.item());
  if (n == 0) return {};
  Tensor bytes = Tensor::zeros({n}, DType::u8, Device::cpu());
  if (comm.rank() == root) std::copy(text.begin(), text.end(), bytes.data_as<uint8_t>());
  bytes = bytes.to(comm.device());
  comm.broadcast(bytes, root);
  const Tensor host = bytes.to(Device::cpu());
  return std::string(reinterpret_cast<const char*>(host.data()), static_cast<size_t>(n));
}

}  // namespace cnn::distributed
