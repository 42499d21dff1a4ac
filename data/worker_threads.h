// Starting a group of worker threads without leaving any behind when one cannot be started (the
// system's thread or memory limit): a std::vector<std::thread> destroyed with running threads in
// it ends the process in std::terminate, so the ones already running are stopped and joined, and
// the failure becomes a cnn::Error that says how many started and which setting to lower.
#pragma once
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace cnn::data {

// Starts `count` threads running body(index). When thread number k cannot be started, calls
// stop() (which must make the running bodies return), joins threads 0..k-1 and throws a cnn::Error
// naming `what` (e.g. "data loader workers") and `setting` (e.g. "[data] workers").
std::vector<std::thread> start_threads(int count, const std::function<void(int)>& body, const std::function<void()>& stop,
                                       const std::string& what, const std::string& setting);

}  // namespace cnn::data
