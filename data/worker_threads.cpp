// Starting worker threads all or none (see worker_threads.h).
#include "data/worker_threads.h"

#include <system_error>

#include "engine/error.h"

namespace cnn::data {

std::vector<std::thread> start_threads(int count, const std::function<void(int)>& body, const std::function<void()>& stop,
                                       const std::string& what, const std::string& setting) {
  std::vector<std::thread> threads;
  try {
    threads.reserve(static_cast<size_t>(count));
    for (int i = 0; i < count; ++i) threads.emplace_back(body, i);
  } catch (const std::exception& e) {  // std::system_error from the thread, or std::bad_alloc
    const size_t started = threads.size();
    stop();
    for (std::thread& t : threads) t.join();
    throw Error(detail::concat("could not start ", count, " ", what, " (", started, " started): ", e.what(),
                               "; the system's thread or memory limit was reached: lower ", setting));
  }
  return threads;
}

}  // namespace cnn::data
