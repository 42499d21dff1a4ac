// The stop request of Ctrl-C and SIGTERM (see interrupt.h).
#include "train/interrupt.h"

#include <csignal>

namespace cnn::train {

namespace {
volatile std::sig_atomic_t stop_requested = 0;
struct sigaction previous_int, previous_term;

extern "C" void on_stop_signal(int signal) {
  if (stop_requested) {  // the second one: the default action, now
    std::signal(signal, SIG_DFL);
    std::raise(signal);
    return;
  }
  stop_requested = 1;
}
}  // namespace

InterruptHandler::InterruptHandler() {
  stop_requested = 0;
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;  // reads and writes in progress go on; the trainer checks between steps
  sigaction(SIGINT, &action, &previous_int);
  sigaction(SIGTERM, &action, &previous_term);
}

InterruptHandler::~InterruptHandler() {
  sigaction(SIGINT, &previous_int, nullptr);
  sigaction(SIGTERM, &previous_term, nullptr);
}

bool InterruptHandler::requested() { return stop_requested != 0; }

std::function<bool()> stop_check_for(int64_t world_size) {
  if (world_size != 1) return {};
  return &InterruptHandler::requested;
}

}  // namespace cnn::train
