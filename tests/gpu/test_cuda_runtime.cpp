// The host side of the CUDA runtime (label gpu): statuses the engine handles itself are not left
// behind as the thread's last error for the next kernel launch to report (kernels/cuda/
// runtime_status.h), pinned host memory is cached and waits for the copies recorded on it, and a
// copy between two GPUs is ordered against both devices' streams.
#include <doctest/doctest.h>

#include <atomic>
#include <cstdint>

#include "agreement.h"
#include "engine/cnn.h"

#if CNN_WITH_CUDA
#include <cuda_runtime.h>

using namespace cnn;
using namespace cnn::testing;

namespace {
// A non-blocking stream of cuda:0 held up by a host function until release(): the work queued on it
// after the hold, and every event recorded on it, stay not ready for as long as the test wants.
class HeldStream {
 public:
  HeldStream() {
    cuda::set_device(0);
    REQUIRE(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking) == cudaSuccess);
    REQUIRE(cudaLaunchHostFunc(stream_, &HeldStream::wait, &released_) == cudaSuccess);
  }
  ~HeldStream() {
    release();
    CHECK(cudaStreamSynchronize(stream_) == cudaSuccess);
    CHECK(cudaStreamDestroy(stream_) == cudaSuccess);
  }
  HeldStream(const HeldStream&) = delete;
  HeldStream& operator=(const HeldStream&) = delete;
  void release() { released_ = true; }
  void* get() const { return stream_; }

 private:
  static void wait(void* flag) {
    while (!static_cast<std::atomic<bool>*>(flag)->load()) {
    }
  }
  cudaStream_t stream_ = nullptr;
  std::atomic<bool> released_{false};
};

// A kernel launch on cuda:0 through CNN_KERNEL, whose check reads the thread's last error.
void launch_a_kernel() { CHECK(sum(Tensor::full({256}, 3.0, DType::f32, Device::cuda(0))).item() == 768.0); }
}  // namespace

TEST_CASE("gpu: an event query that finds the work still running leaves no error for the next launch") {
  // cudaEventQuery answers cudaErrorNotReady and, uncleared, the next kernel's check reported it as
  // a launch failure (graph replays after an Upload's destructor, allocations after collectives).
  HeldStream held;
  cuda::Event event(0);
  event.record(held.get());
  CHECK_FALSE(event.done());
  CHECK(cudaPeekAtLastError() == cudaSuccess);
  launch_a_kernel();
  held.release();
  event.synchronize();
  CHECK(event.done());
}

TEST_CASE("gpu: the allocator's look at a free still waiting for another stream leaves no error") {
  HeldStream held;
  {
    Tensor used_elsewhere = Tensor::zeros({1 << 16}, DType::f32, Device::cuda(0));
    used_elsewhere.record_stream(held.get());
  }  // freed: an event on the held stream, not ready
  const Tensor next = Tensor::empty({1 << 16}, DType::f32, Device::cuda(0));  // queries that event
  CHECK(cudaPeekAtLastError() == cudaSuccess);
  launch_a_kernel();
}

TEST_CASE("gpu: out of memory, on the device or in pinned host memory, leaves no error for the next launch") {
  const int64_t too_much = int64_t{1} << 50;  // a pebibyte
  CHECK_THROWS_AS(Tensor::empty({too_much}, DType::u8, Device::cuda(0)), OutOfMemoryError);
  CHECK(cudaPeekAtLastError() == cudaSuccess);
  launch_a_kernel();
  // cudaHostAlloc may answer another status than out of memory for so much; either way it is thrown.
  CHECK_THROWS_AS(Tensor::empty({too_much}, DType::u8, Device::cpu(), /*pinned=*/true), Error);
  CHECK(cudaPeekAtLastError() == cudaSuccess);
  launch_a_kernel();
}

TEST_CASE("gpu: pinned host blocks are cached, and one a copy was recorded on waits for that copy") {
  Allocator& pinned = pinned_allocator();
  pinned.empty_cache();  // so that the blocks below are the test's own
  const Tensor values = u({1 << 20}, 5);
  {
    const Tensor warm = values.pin_memory();
  }
  const uint64_t system_calls = pinned.stats().system_allocations;
  const void* first = nullptr;
  {
    const Tensor again = values.pin_memory();  // the cached block: no cudaHostAlloc, no cudaFreeHost
    first = again.data();
  }
  CHECK(pinned.stats().system_allocations == system_calls);

  HeldStream held;
  Tensor device = Tensor::empty(values.shape(), values.dtype(), Device::cuda(0));
  {
    const Tensor source = values.pin_memory();
    CHECK(source.data() == first);
    REQUIRE(cudaMemcpyAsync(device.data(), source.data(), source.nbytes(), cudaMemcpyHostToDevice,
                            static_cast<cudaStream_t>(held.get())) == cudaSuccess);
    source.record_stream(held.get());
  }  // freed while the copy waits on the held stream
  const Tensor meanwhile = values.pin_memory();
  CHECK(meanwhile.data() != first);  // the copy still reads the first block
  held.release();
  REQUIRE(cudaStreamSynchronize(static_cast<cudaStream_t>(held.get())) == cudaSuccess);
  const Tensor after = values.pin_memory();
  CHECK(after.data() == first);  // the copy has run: the block is back
  CHECK(device.to(Device::cpu()).to_doubles() == values.to_doubles());
}

TEST_CASE("gpu: a copy between two GPUs reads the source after its queued work, on the destination's stream") {
  if (cuda::device_count() < 2) {
    MESSAGE("skipped: one CUDA device (the copy between two needs two)");
    return;
  }
  // Before, the waits were enqueued on the legacy stream of the wrong device (a null stream is the
  // current device's), so the copy could read the product before the chain had written it.
  const Tensor a_host = u({2048, 2048}, 40), b_host = u({2048, 2048}, 41, -0.01, 0.01);
  const Tensor a = a_host.to(Device::cuda(0));
  Tensor x = b_host.to(Device::cuda(0));
  for (int i = 0; i < 16; ++i) x = matmul(a, x);  // queued on cuda:0, still running when the copy is asked for
  const Tensor on_1 = x.to(Device::cuda(1));
  CHECK(on_1.to(Device::cpu()).to_doubles() == x.to(Device::cpu()).to_doubles());
  // The other way round, with cuda:1 current: the order does not depend on which device is current.
  cuda::set_device(1);
  const Tensor a_1 = a.to(Device::cuda(1));
  Tensor y = on_1;
  for (int i = 0; i < 16; ++i) y = matmul(a_1, y);
  const Tensor back = y.to(Device::cuda(0));
  CHECK(back.to(Device::cpu()).to_doubles() == y.to(Device::cpu()).to_doubles());
}

#endif  // CNN_WITH_CUDA
