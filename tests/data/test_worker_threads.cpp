// Worker threads started all or none: when the system cannot start one more thread, the ones
// already running are stopped and joined, and the caller gets a cnn::Error naming the setting to
// lower. Before, a std::vector of running threads was destroyed by the exception: std::terminate.
#include <doctest/doctest.h>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <fstream>
#include <string>

#include "data/worker_threads.h"
#include "engine/config.h"
#include "engine/error.h"

using namespace cnn;

TEST_CASE("worker threads: all start and run their index") {
  std::atomic<int> sum{0};
  std::vector<std::thread> threads = data::start_threads(
      4, [&](int i) { sum += i + 1; }, [] {}, "test workers", "[test] workers");
  for (std::thread& t : threads) t.join();
  CHECK(threads.size() == 4);
  CHECK(sum == 1 + 2 + 3 + 4);
}

TEST_CASE("worker threads: when the system refuses a thread, the started ones are stopped and joined and the error names the setting") {
#if CNN_SANITIZED
  // The sanitizers reserve terabytes of address space: a limit on it cannot be set under them.
  MESSAGE("skipped under the sanitizers (they need an unlimited address space)");
#else
  // In a child process: its address space is limited to what it uses now plus 32 MiB, so that only
  // a few 8 MiB thread stacks fit.
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    std::ifstream status("/proc/self/status");
    long vm_kib = 0;
    for (std::string line; std::getline(status, line);)
      if (line.rfind("VmSize:", 0) == 0) vm_kib = std::stol(line.substr(7));
    const rlim_t limit = static_cast<rlim_t>(vm_kib + 32 * 1024) * 1024;
    const rlimit lim{limit, limit};
    if (::setrlimit(RLIMIT_AS, &lim) != 0) ::_exit(4);
    std::atomic<bool> stop{false};
    std::atomic<int> running{0};
    try {
      data::start_threads(
          64,
          [&](int) {
            ++running;
            while (!stop) std::this_thread::sleep_for(std::chrono::milliseconds(1));
            --running;
          },
          [&] { stop = true; }, "test workers", "[test] workers");
      ::_exit(2);  // all 64 started: the limit did not bite
    } catch (const Error& e) {
      const bool named = std::strstr(e.what(), "could not start 64 test workers (") != nullptr &&
                         std::strstr(e.what(), "lower [test] workers") != nullptr;
      ::_exit(named && running == 0 ? 0 : 3);
    }
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  INFO("child status " << status);
  REQUIRE(WIFEXITED(status));  // not killed by std::terminate's abort
  CHECK(WEXITSTATUS(status) == 0);
#endif
}
