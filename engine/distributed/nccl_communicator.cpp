// The NCCL backend of the Communicator (communicator.h): CUDA tensors of one device, over an NCCL
// communicator joined with the id that rank 0 made (nccl_unique_id, shared by connect()).
//
// How it works:
//   - The communicator is non-blocking (config.blocking = 0), so no NCCL call can hang the caller:
//     init, and any enqueue that answers ncclInProgress, are polled with ncclCommGetAsyncError
//     within the timeout.
//   - Collectives run on a communication stream of their own (cuda::take_stream: kept for the life of
//     the process, since blocks recorded on it are freed after the communicator is gone, and their
//     events are recorded on it then). Each one first waits (an event) for
//     the work enqueued so far on the engine's compute stream, then runs, then records a done event;
//     Pending::wait() makes the compute stream wait for that event, so the host does not block.
//     broadcast and all_gather wait that way at once; barrier waits on the host.
//   - A watchdog thread (like PyTorch's NCCL watchdog) watches the collectives in flight. One that
//     has not finished within the timeout, or an error the communicator reports (a rank died, the
//     network failed), is printed with the rank and the collective; then the communicator is
//     aborted and the process ends, so a hung job fails instead of waiting forever.
//   - A collective's tensors stay alive until it is done: its watchdog entry holds their handles.
#include "engine/config.h"

#if CNN_WITH_NCCL
#include <cuda_runtime.h>
#include <nccl.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "engine/byte_size.h"
#include "engine/cuda_context.h"
#include "engine/distributed/backends.h"
#include "engine/error.h"
#include "kernels/cuda/runtime_status.h"

namespace cnn::distributed {

using kernels::cuda::cleared;
using kernels::cuda::report_runtime_failure;

namespace {

using Clock = std::chrono::steady_clock;

constexpr const char* kHint =
    "set NCCL_DEBUG=INFO for NCCL's own log, and NCCL_SOCKET_IFNAME=<interface> when the ranks reach "
    "each other over another network interface than the one NCCL picked";

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

ncclDataType_t nccl_dtype(DType dtype) {
  switch (dtype) {
    case DType::f32: return ncclFloat32;
    case DType::f16: return ncclFloat16;
    case DType::bf16: return ncclBfloat16;
    case DType::f64: return ncclFloat64;
    case DType::i64: return ncclInt64;
    case DType::i32: return ncclInt32;
    case DType::u8: return ncclUint8;
  }
  CNN_FAIL("NCCL cannot carry tensors of dtype ", dtype_name(dtype));
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return ncclSum;
    case ReduceOp::average: return ncclAvg;
    case ReduceOp::max: return ncclMax;
  }
  CNN_FAIL("NCCL: unknown ReduceOp ", static_cast<int>(op));
}

// A collective's done event, shared by its pending and its watchdog entry.
struct CudaEvent {
  cudaEvent_t event = nullptr;
  ~CudaEvent() {
    if (event) report_runtime_failure(cudaEventDestroy(event), "cudaEventDestroy of an NCCL collective's done event");
  }
};

// A collective in flight, as the watchdog sees it.
struct InFlight {
  const char* collective;
  size_t bytes;
  double timeout_seconds;  // taken when it started (the watchdog must not read the base's field)
  Clock::time_point start;
  std::shared_ptr<CudaEvent> done;
  std::vector<Tensor> tensors;  // kept alive until the NCCL kernel has run
};

class NcclPending final : public PendingCollective {
 public:
  NcclPending(int device, const char* collective, size_t bytes, std::shared_ptr<CudaEvent> done)
      : device_(device), collective_(collective), bytes_(bytes), done_(std::move(done)) {}
  ~NcclPending() override {
    try {
      wait();
    } catch (...) {  // a destructor cannot report; the watchdog reports a broken communicator
    }
  }
  void wait() override {
    if (!done_) return;
    const std::shared_ptr<CudaEvent> done = std::move(done_);
    cuda::set_device(device_);  // a null compute stream is the legacy default stream of the current device
    const cudaError_t err =
        cleared(cudaStreamWaitEvent(static_cast<cudaStream_t>(cuda::current_stream(device_)), done->event, 0));
    CNN_CHECK(err == cudaSuccess, "NCCL ", collective_, " of ", format_bytes(static_cast<double>(bytes_)), " on cuda:",
              device_, ": the compute stream could not wait for it (cudaStreamWaitEvent failed: ",
              cudaGetErrorString(err), "); ", kHint);
  }

 private:
  int device_;
  const char* collective_;
  size_t bytes_;
  std::shared_ptr<CudaEvent> done_;
};

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(const World& world, int device, const ncclUniqueId& id, double timeout_seconds)
      : Communicator(world), device_(device) {
    set_timeout_seconds(timeout_seconds);
    CNN_CHECK(world.world_size >= 1 && world.rank >= 0 && world.rank < world.world_size,
              "NCCL communicator: rank ", world.rank, " of world size ", world.world_size, " is not a place in a job");
    try {
      cuda::require_device(device);
      cuda::set_device(device);
      stream_ = static_cast<cudaStream_t>(cuda::take_stream(device));
      check(cudaEventCreateWithFlags(&ready_, cudaEventDisableTiming), "init", "cudaEventCreateWithFlags");
      init(id);
    } catch (...) {
      if (comm_) ncclCommAbort(comm_);
      if (ready_) report_runtime_failure(cudaEventDestroy(ready_), "cudaEventDestroy");
      if (stream_) cuda::give_back_stream(device, stream_);
      throw;
    }
    watchdog_ = std::thread([this] { watch(); });
  }

  ~NcclCommunicator() override {
    // In-flight work first, while the watchdog still bounds the wait.
    report_runtime_failure(cudaSetDevice(device_), "cudaSetDevice to end an NCCL communicator");
    report_runtime_failure(cudaStreamSynchronize(stream_), "cudaStreamSynchronize of an ending NCCL communicator's stream");
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    watchdog_.join();
    in_flight_.clear();
    // Finalize flushes NCCL's own work with the peers; non-blocking, it answers ncclInProgress.
    ncclResult_t state = ncclCommFinalize(comm_);
    const auto start = Clock::now();
    while (state == ncclInProgress && seconds_since(start) < timeout_seconds()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      state = async_error();
    }
    if (state == ncclSuccess) {
      ncclCommDestroy(comm_);
    } else {
      std::fprintf(stderr, "cnn distributed: rank %d: NCCL finalize %s; aborting the communicator (%s)\n", rank(),
                   state == ncclInProgress ? "did not finish in time" : ncclGetErrorString(state), kHint);
      ncclCommAbort(comm_);
    }
    report_runtime_failure(cudaEventDestroy(ready_), "cudaEventDestroy of an ending NCCL communicator's event");
    // Not destroyed: the blocks recorded on it (the collectives' tensors, barrier_value_) record
    // events on it when they are freed, which may be later than this.
    cuda::give_back_stream(device_, stream_);
  }

  const char* backend() const override { return "nccl"; }
  Device device() const override { return Device::cuda(device_); }

  Pending start_all_reduce(const Tensor& t, ReduceOp op) override {
    check_tensor("all_reduce", t);
    const ncclDataType_t type = nccl_dtype(t.dtype());
    const ncclRedOp_t reduce = nccl_op(op);
    void* data = t.data();
    auto done = launch("all_reduce", t.nbytes(), {t}, [&] {
      return ncclAllReduce(data, data, static_cast<size_t>(t.numel()), type, reduce, comm_, stream_);
    });
    return std::make_unique<NcclPending>(device_, "all_reduce", t.nbytes(), std::move(done));
  }

  void run_broadcast(const Tensor& t, int root) override {
    check_tensor("broadcast", t);
    CNN_CHECK(root >= 0 && root < world_size(), "broadcast: root ", root, " is not a rank of this job (world size ",
              world_size(), ")");
    const ncclDataType_t type = nccl_dtype(t.dtype());
    void* data = t.data();
    auto done = launch("broadcast", t.nbytes(), {t}, [&] {
      return ncclBroadcast(data, data, static_cast<size_t>(t.numel()), type, root, comm_, stream_);
    });
    NcclPending(device_, "broadcast", t.nbytes(), std::move(done)).wait();
  }

  Tensor run_all_gather(const Tensor& t) override {
    check_tensor("all_gather", t);
    CNN_CHECK(t.dim() < Shape::kMaxDims, "all_gather of ", cnn::describe(t), ": the result would have more than ",
              Shape::kMaxDims, " dimensions");
    std::vector<int64_t> dims = t.shape().to_vector();
    dims.insert(dims.begin(), world_size());
    Tensor out = Tensor::empty(Shape(dims), t.dtype(), device());
    const ncclDataType_t type = nccl_dtype(t.dtype());
    auto done = launch("all_gather", t.nbytes(), {t, out}, [&] {
      return ncclAllGather(t.data(), out.data(), static_cast<size_t>(t.numel()), type, comm_, stream_);
    });
    NcclPending(device_, "all_gather", t.nbytes(), std::move(done)).wait();
    return out;
  }

  void barrier() override {
    if (!barrier_value_.defined()) barrier_value_ = Tensor::zeros({1}, DType::f32, device());
    void* data = barrier_value_.data();
    auto done = launch("barrier", sizeof(float), {barrier_value_},
                       [&] { return ncclAllReduce(data, data, 1, ncclFloat32, ncclSum, comm_, stream_); });
    // The host waits, which is what a barrier is for; the watchdog bounds the wait.
    check(cudaEventSynchronize(done->event), "barrier", "cudaEventSynchronize");
  }

  [[noreturn]] void abort(const std::string& why) noexcept override { die("aborting the job: " + why); }

 private:
  void check(cudaError_t err, const char* collective, const char* call) const {
    CNN_CHECK(cleared(err) == cudaSuccess, "NCCL ", collective, " on rank ", rank(), " (cuda:", device_, "): ", call,
              " failed: ", cudaGetErrorString(err));
  }

  std::string last_error() const {
    const char* text = ncclGetLastError(comm_);
    return text && *text ? std::string(" (") + text + ")" : std::string();
  }

  // The communicator's state: ncclSuccess, ncclInProgress (a non-blocking call still settling) or an error.
  ncclResult_t async_error() {
    std::lock_guard<std::mutex> lock(nccl_mutex_);
    ncclResult_t state = ncclSuccess;
    const ncclResult_t result = ncclCommGetAsyncError(comm_, &state);
    return result != ncclSuccess ? result : state;
  }

  void init(const ncclUniqueId& id) {
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclResult_t state = ncclCommInitRankConfig(&comm_, world_size(), id, rank(), &config);
    const auto start = Clock::now();
    while (state == ncclInProgress) {
      CNN_CHECK(seconds_since(start) < timeout_seconds(), "NCCL init of rank ", rank(), " of ", world_size(),
                " on cuda:", device_, " did not finish within ", timeout_seconds(),
                " s: a rank has not joined (not started, or it cannot reach rank 0's address); ", kHint);
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      state = async_error();
    }
    CNN_CHECK(state == ncclSuccess, "NCCL init of rank ", rank(), " of ", world_size(), " on cuda:", device_,
              " failed: ", ncclGetErrorString(state), last_error(),
              "; every rank must join with the same id and world size; ", kHint);
  }

  // Orders the communication stream after the compute stream, enqueues the NCCL call on it, records
  // the done event and hands the collective to the watchdog.
  template <class Enqueue>
  std::shared_ptr<CudaEvent> launch(const char* collective, size_t bytes, std::vector<Tensor> tensors,
                                    Enqueue enqueue) {
    cuda::set_device(device_);
    const auto compute = static_cast<cudaStream_t>(cuda::current_stream(device_));
    // ready_ is reused: cudaStreamWaitEvent waits for the record made before it, not for later ones.
    check(cudaEventRecord(ready_, compute), collective, "cudaEventRecord");
    check(cudaStreamWaitEvent(stream_, ready_, 0), collective, "cudaStreamWaitEvent");
    auto done = std::make_shared<CudaEvent>();
    check(cudaEventCreateWithFlags(&done->event, cudaEventDisableTiming), collective, "cudaEventCreateWithFlags");
    // An empty tensor has the same shape on every rank, so every rank skips the call alike.
    if (bytes > 0) settle(enqueue(), collective, bytes);
    // Their blocks must not be reused on the compute stream before the collective has run, even if
    // the watchdog lets go of them first.
    for (const Tensor& t : tensors) t.record_stream(stream_);
    const cudaError_t err = cudaEventRecord(done->event, stream_);
    if (err != cudaSuccess)  // the kernel is enqueued; its tensors cannot be let go safely
      die(std::string("cudaEventRecord after NCCL ") + collective + " failed: " + cudaGetErrorString(err));
    std::lock_guard<std::mutex> lock(mutex_);
    in_flight_.push_back({collective, bytes, timeout_seconds(), Clock::now(), done, std::move(tensors)});
    return done;
  }

  // A non-blocking communicator may answer ncclInProgress before the call has reached the stream;
  // nothing that depends on the call may be enqueued until the communicator's state settles.
  void settle(ncclResult_t result, const char* collective, size_t bytes) {
    const auto start = Clock::now();
    while (result == ncclInProgress) {
      if (seconds_since(start) > timeout_seconds())
        die(detail::concat(collective_text(collective, bytes), " was not enqueued within ", timeout_seconds(), " s; ",
                           kHint));
      std::this_thread::yield();
      result = async_error();
    }
    CNN_CHECK(result == ncclSuccess, "NCCL ", collective, " of ", bytes, " bytes on rank ", rank(), " failed: ",
              ncclGetErrorString(result), last_error(), "; ", kHint);
  }

  static std::string collective_text(const char* collective, size_t bytes) {
    return detail::concat("NCCL ", collective, " of ", bytes, " bytes");
  }

  void watch() {
    // Else the runtime would make a context on device 0 for this thread.
    report_runtime_failure(cudaSetDevice(device_), "cudaSetDevice of the NCCL watchdog");
    std::unique_lock<std::mutex> lock(mutex_);
    while (!stopping_) {
      wake_.wait_for(lock, std::chrono::milliseconds(50));
      // One stream: collectives finish in the order they started, so only the front can be done.
      std::vector<InFlight> finished;
      while (!in_flight_.empty()) {
        // Not ready is an answer, not this thread's error (kernels/cuda/runtime_status.h).
        const cudaError_t err = cleared(cudaEventQuery(in_flight_.front().done->event));
        if (err == cudaErrorNotReady) break;
        if (err != cudaSuccess)
          die(collective_text(in_flight_.front().collective, in_flight_.front().bytes) + " failed: CUDA " +
              cudaGetErrorString(err) + "; " + kHint);
        finished.push_back(std::move(in_flight_.front()));
        in_flight_.pop_front();
      }
      const ncclResult_t state = async_error();
      if (state != ncclSuccess && state != ncclInProgress) {
        const std::string what = in_flight_.empty()
                                     ? std::string("the NCCL communicator")
                                     : collective_text(in_flight_.front().collective, in_flight_.front().bytes);
        die(what + " failed: " + ncclGetErrorString(state) + last_error() + "; " + kHint);
      }
      if (!in_flight_.empty()) {
        const InFlight& oldest = in_flight_.front();
        if (seconds_since(oldest.start) > oldest.timeout_seconds)
          die(detail::concat(collective_text(oldest.collective, oldest.bytes), " did not finish within ",
                             oldest.timeout_seconds, " s: a rank died, is stuck in other work, or the ranks issued ",
                             "collectives in different orders; ", kHint));
      }
      lock.unlock();  // the tensors go back to the allocator outside our lock
      finished.clear();
      lock.lock();
    }
  }

  // Prints why, aborts the communicator (the other ranks then fail fast too) and ends the process.
  [[noreturn]] void die(const std::string& message) noexcept {
    if (dying_.exchange(true))  // the other thread is already ending the process
      for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
    std::fprintf(stderr, "cnn distributed: rank %d of %d: %s\n", rank(), world_size(), message.c_str());
    std::fflush(stderr);
    // ncclCommAbort can itself hang on a broken network: end the process regardless after a while.
    std::thread([] {
      std::this_thread::sleep_for(std::chrono::seconds(10));
      std::_Exit(1);
    }).detach();
    {
      std::lock_guard<std::mutex> lock(nccl_mutex_);
      ncclCommAbort(comm_);
    }
    std::_Exit(1);
  }

  int device_;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;  // the communication stream
  cudaEvent_t ready_ = nullptr;    // marks the compute stream's work before a collective
  Tensor barrier_value_;
  std::mutex nccl_mutex_;  // ncclCommGetAsyncError and ncclCommAbort never run on the comm at once
  std::mutex mutex_;       // in_flight_ and stopping_
  std::condition_variable wake_;
  std::deque<InFlight> in_flight_;
  bool stopping_ = false;
  std::atomic<bool> dying_{false};
  std::thread watchdog_;
};

}  // namespace

std::string nccl_unique_id() {
  ncclUniqueId id;
  const ncclResult_t result = ncclGetUniqueId(&id);
  CNN_CHECK(result == ncclSuccess, "ncclGetUniqueId failed: ", ncclGetErrorString(result), "; ", kHint);
  return std::string(id.internal, sizeof id.internal);
}

CommunicatorPtr make_nccl_communicator(const World& world, int device, const std::string& unique_id,
                                       double timeout_seconds) {
  ncclUniqueId id;
  CNN_CHECK(unique_id.size() == sizeof id.internal, "NCCL communicator of rank ", world.rank, ": the NCCL id has ",
            unique_id.size(), " bytes, not ", sizeof id.internal, " (it must be rank 0's nccl_unique_id(), unchanged)");
  std::memcpy(id.internal, unique_id.data(), sizeof id.internal);
  return std::make_shared<NcclCommunicator>(world, device, id, timeout_seconds);
}

}  // namespace cnn::distributed

#endif  // CNN_WITH_NCCL
