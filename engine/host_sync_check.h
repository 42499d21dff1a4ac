// A check that a stretch of work never makes the host wait for the device. While a HostSyncCheck is
// open on a thread, each call of this thread that would wait (a tensor's values read on the host,
// a copy between host and device memory, a stream or event synchronisation) throws cnn::Error naming
// the call and the stretch. That is what a CUDA graph capture forbids, and what the training step
// promises (its loss scale, inf/nan verdict, clipping and step counts stay on the device): the
// tests run the whole step under a check, on the CPU as well, where the same calls are the host
// reads that would be synchronisations on a GPU.
//
//   { HostSyncCheck check("the training step"); forward_backward(...); optimizer_step(...); }
#pragma once
#include <string>

namespace cnn {

class HostSyncCheck {
 public:
  explicit HostSyncCheck(std::string stretch);
  ~HostSyncCheck();
  HostSyncCheck(const HostSyncCheck&) = delete;
  HostSyncCheck& operator=(const HostSyncCheck&) = delete;

 private:
  std::string previous_;  // the enclosing check's stretch (checks nest)
};

// Called by the engine where the host would wait for the device: throws while a check is open.
void host_sync_point(const char* call);

}  // namespace cnn
