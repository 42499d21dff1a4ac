// Ctrl-C (SIGINT) and SIGTERM during a training run: the first one asks the trainer to stop after
// the current optimizer step (it writes last.h5 and says how to resume); a second one ends the
// process at once, as it would without the handler. Installed for the length of a run (RAII).
#pragma once

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

}  // namespace cnn::train
