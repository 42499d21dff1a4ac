// Ctrl-C (SIGINT) and SIGTERM during a training run: the first one asks the trainer to stop after
// the current optimizer step (it writes last.h5 and says how to resume); a second one ends the
// process at once, as it would without the handler. Installed for the length of a run (RAII).
#pragma once
#include <cstdint>
#include <functional>

namespace cnn::train {

class InterruptHandler {
 public:
  InterruptHandler();   // installs the handlers (and clears an earlier request)
  ~InterruptHandler();  // restores the previous handlers
  InterruptHandler(const InterruptHandler&) = delete;
  InterruptHandler& operator=(const InterruptHandler&) = delete;

  // Whether a stop was asked for since the handler was installed.
  static bool requested();
};

// The stop check for waits that one process may end on its own (a loader waiting for a batch, a
// validation pass): InterruptHandler::requested in a run of one process. None in a data-parallel
// run: ranks stopping at different points would not meet in their next collective, so they agree
// on a stop at logged steps instead (and a second Ctrl-C ends them at once).
std::function<bool()> stop_check_for(int64_t world_size);

}  // namespace cnn::train
