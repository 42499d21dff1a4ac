// Host-to-device copies that overlap compute: tensors in (pinned) host memory are copied to a CUDA
// device on that device's copy stream (a non-blocking stream of its own), and the compute stream is
// made to wait for the copy with an event, so neither the host nor the compute stream stalls.
//
//   Upload up = upload_async({images, labels}, Device::cuda(0));  // on a loader thread
//   ...
//   up.make_compute_wait();  // on the consumer: the compute stream waits for the copy, the host does not
//   Tensor x = up.tensors[0];
//
// Ordering: the device memory comes from the caching allocator's pool of the compute stream, where it
// may just have been freed by kernels still queued there; the copy stream therefore first waits for
// the compute stream's work enqueued so far. An upload dropped without make_compute_wait() (a batch
// abandoned when an epoch restarts) still makes the compute stream wait before its device blocks
// return to the pool, so the copy can never write into memory reused there. Its host tensors stay
// referenced until the copy has completed, even past the Upload's life (they are then released by a
// later upload_async), so pinned memory is never freed or reused under a copy in flight. Without
// CUDA (or for a CPU target) upload_async is a plain copy.
#pragma once
#include <memory>
#include <vector>

#include "engine/cuda_context.h"
#include "engine/device.h"
#include "engine/tensor.h"

namespace cnn {

struct Upload {
  std::vector<Tensor> tensors;  // on the target device
  // Makes the target device's compute stream (cuda::current_stream) wait for the copy; no host wait.
  void make_compute_wait() const;
  // The host waits for the copy (then the host tensors may be reused).
  void wait_host() const;
  bool finished() const;
  // The event marking the copy's completion (null when the copy was synchronous), for owners of the
  // host buffers that outlive this Upload.
  std::shared_ptr<cuda::Event> completion() const;

  struct InFlight;  // the copy's event, host and device tensors; see async_copy.cpp

 private:
  friend Upload upload_async(const std::vector<Tensor>& host, Device device);
  std::shared_ptr<InFlight> in_flight_;  // null when the copy was synchronous
};

// Copies each host tensor (contiguous; pinned for a truly asynchronous copy) to `device`.
Upload upload_async(const std::vector<Tensor>& host, Device device);

}  // namespace cnn
