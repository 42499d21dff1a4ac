// The host-synchronisation check (see host_sync_check.h): one thread-local name, empty when no
// check is open.
#include "engine/host_sync_check.h"

#include <utility>

#include "engine/error.h"

namespace cnn {

namespace {
thread_local std::string open_stretch;
}  // namespace

HostSyncCheck::HostSyncCheck(std::string stretch) : previous_(std::exchange(open_stretch, std::move(stretch))) {}

HostSyncCheck::~HostSyncCheck() { open_stretch = std::move(previous_); }

void host_sync_point(const char* call) {
  if (open_stretch.empty()) [[likely]]
    return;
  throw Error(detail::concat(call, " during ", open_stretch,
                             ": it makes the host wait for the device, which this stretch must not (a CUDA graph "
                             "cannot capture it, and each wait stalls the GPU); keep the value on the device and read "
                             "it after the step"));
}

}  // namespace cnn
