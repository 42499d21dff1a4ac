// Timing shared by the benchmarks: the median wall time of a call, after warm-up calls.
#pragma once
#include <algorithm>
#include <chrono>
#include <functional>
#include <vector>

namespace cnn::bench {

// Median seconds per call of fn over `repeats` samples after `warmup` calls; `sync` waits for the
// device (a no-op on the CPU), so each sample covers the work fn enqueued.
inline double median_seconds(const std::function<void()>& fn, const std::function<void()>& sync, int warmup,
                             int repeats) {
  for (int i = 0; i < warmup; ++i) fn();
  sync();
  std::vector<double> samples;
  for (int i = 0; i < repeats; ++i) {
    const auto start = std::chrono::steady_clock::now();
    fn();
    sync();
    samples.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(samples.begin(), samples.end());
  return samples[samples.size() / 2];
}

}  // namespace cnn::bench
