// Host-to-device uploads on a copy stream, ordered against the compute stream with events (see
// async_copy.h); the CUDA runtime calls themselves are the CUDA context's (cuda_context.h).
#include "engine/async_copy.h"

#include <atomic>
#include <mutex>
#include <string>

#include "engine/config.h"
#include "engine/cuda_context.h"
#include "engine/error.h"


namespace cnn {

// What an upload leaves in flight. Its destructor runs when the last Upload copy (and so the last
// holder of the device tensors below) goes away: unless the consumer already made the compute stream
// wait, it does so now, before the device blocks return to the compute stream's pool; host tensors
// whose copy is still running are handed to the deferred release.
struct Upload::InFlight {
  Device device;
  std::shared_ptr<cuda::Event> copied;
  std::vector<Tensor> host, device_tensors;
  std::atomic<bool> compute_waited{false};
  ~InFlight();
};

// Host tensors of uploads that were dropped before their copy finished, released once it has.
class DeferredRelease {
 public:
  void add(std::shared_ptr<cuda::Event> copied, std::vector<Tensor> host) {
    std::lock_guard<std::mutex> lock(mutex_);
    pending_.push_back({std::move(copied), std::move(host)});
  }
  void release_finished() {
    std::lock_guard<std::mutex> lock(mutex_);
    std::erase_if(pending_, [](const Entry& e) { return e.copied->done(); });
  }

 private:
  struct Entry {
    std::shared_ptr<cuda::Event> copied;
    std::vector<Tensor> host;
  };
  std::mutex mutex_;
  std::vector<Entry> pending_;
};

DeferredRelease& deferred_release() {
  static DeferredRelease* deferred = new DeferredRelease;  // never destroyed: no teardown-order issues
  return *deferred;
}

#if CNN_WITH_CUDA
Upload upload_async(const std::vector<Tensor>& host, Device device) {
  Upload up;
  if (!device.is_cuda()) {
    for (const Tensor& t : host) up.tensors.push_back(t.to(device));
    return up;
  }
  deferred_release().release_finished();
  for (const Tensor& t : host)
    CNN_CHECK(t.device().is_cpu(), "upload_async: the tensors must be in host memory, not ", t.device().str());
  const int index = device.index;
  void* compute = cuda::current_stream(index);
  void* copies = cuda::copy_stream(index);
  auto flight = std::make_shared<Upload::InFlight>();
  flight->device = device;
  flight->host = host;
  flight->copied = std::make_shared<cuda::Event>(index);  // before any copy: every exit below has it
  for (const Tensor& t : host) flight->device_tensors.push_back(Tensor::empty(t.shape(), t.dtype(), device));
  // The new blocks may have been freed by compute-stream kernels still queued: copy after them.
  cuda::Event compute_so_far(index);
  compute_so_far.record(compute);
  compute_so_far.make_wait(copies);
  try {
    for (size_t i = 0; i < host.size(); ++i)
      cuda::copy_to_device_async(flight->device_tensors[i].data(), host[i].data(), host[i].nbytes(), copies);
    flight->copied->record(copies);
  } catch (...) {
    try {  // nothing may still read or write these buffers once they are released
      cuda::Event drained(index);
      drained.record(copies);
      drained.synchronize();
    } catch (...) {
    }
    flight->copied.reset();
    throw;
  }
  up.tensors = flight->device_tensors;
  up.in_flight_ = std::move(flight);
  return up;
}
#else
Upload upload_async(const std::vector<Tensor>& host, Device device) {
  Upload up;
  for (const Tensor& t : host) up.tensors.push_back(t.to(device));  // a CUDA target explains what is missing
  return up;
}
#endif

Upload::InFlight::~InFlight() {
  if (!copied) return;
  try {
    // Abandoned: the device blocks go back to the compute stream's pool below, so that stream
    // must not run past the copy.
    if (!compute_waited) copied->make_wait(cuda::current_stream(device.index));
    if (!copied->done()) deferred_release().add(copied, std::move(host));
  } catch (...) {  // a destructor must not throw; a broken device fails loudly elsewhere
  }
}

void Upload::make_compute_wait() const {
  if (!in_flight_ || !in_flight_->copied) return;
  in_flight_->copied->make_wait(cuda::current_stream(in_flight_->device.index));
  in_flight_->compute_waited = true;
}
void Upload::wait_host() const {
  if (in_flight_ && in_flight_->copied) in_flight_->copied->synchronize();
}
bool Upload::finished() const { return !in_flight_ || !in_flight_->copied || in_flight_->copied->done(); }
std::shared_ptr<cuda::Event> Upload::completion() const { return in_flight_ ? in_flight_->copied : nullptr; }


}  // namespace cnn
