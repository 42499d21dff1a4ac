// A library's ranked algorithms for one call (cuDNN's heuristic or measured ranking of a
// convolution), walked down when an entry fails, as PyTorch's "try all" does: an entry the library
// turns down (NOT_SUPPORTED) or whose workspace cannot be allocated is demoted, the next one is
// tried, and later calls start below the demoted entries. Only when every entry has failed is the
// call an error, and the error names each entry and why it failed.
// Library-free (the cuDNN file fills it in), so the walk is tested on the CPU with fake attempts.
#pragma once
#include <atomic>
#include <cstddef>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "kernels/common/error.h"

namespace cnn::kernels {

struct RankedAlgorithm {
  int algorithm = 0;     // the library's enum value
  int math = 0;          // the math type it runs under (cuDNN: cudnnMathType_t)
  size_t workspace = 0;  // bytes it needs
  std::string name;      // for messages and bench_conv, e.g. "implicit_precomp_gemm"
};

// What one try of an entry came to.
enum class AttemptOutcome { ran, not_supported, workspace_unavailable };

class AlgorithmRanking {
 public:
  explicit AlgorithmRanking(std::vector<RankedAlgorithm> entries) : entries_(std::move(entries)) {}

  // Runs `attempt(entry)` -> AttemptOutcome on the entries from the first one not demoted, until one
  // ran; returns that one. `what` names the call for the error when none did ("conv2d forward ..."):
  // a string, or a function that makes it (called only then, so a call that runs formats nothing).
  template <class What, class Attempt>
  const RankedAlgorithm& run(const What& what, Attempt&& attempt) {
    std::vector<std::pair<size_t, AttemptOutcome>> failures;
    for (size_t i = first_.load(); i < entries_.size(); ++i) {
      const AttemptOutcome outcome = attempt(entries_[i]);
      if (outcome == AttemptOutcome::ran) return entries_[i];
      failures.emplace_back(i, outcome);
      demote_through(i);
    }
    CNN_FAIL(name_of(what), ": no algorithm of the library's ranking could run", describe(failures),
             "; lower the batch size or free GPU memory (a workspace that cannot be allocated demotes an "
             "algorithm for the rest of the run)");
  }

  // The entry a call starts with (the first not demoted); an error if every entry was.
  const RankedAlgorithm& current() const {
    const size_t first = first_.load();
    CNN_CHECK(first < entries_.size(), "every algorithm of this ranking has failed earlier in the run");
    return entries_[first];
  }
  size_t demoted() const { return first_.load(); }
  const std::vector<RankedAlgorithm>& entries() const { return entries_; }

 private:
  template <class What>
  static std::string name_of(const What& what) {
    if constexpr (std::is_invocable_v<const What&>)
      return what();
    else
      return std::string(what);
  }

  // Entries up to i are skipped from now on (several threads may demote at once: keep the furthest).
  void demote_through(size_t i) {
    size_t first = first_.load();
    while (first <= i && !first_.compare_exchange_weak(first, i + 1)) {
    }
  }

  std::string describe(const std::vector<std::pair<size_t, AttemptOutcome>>& failures) const {
    if (entries_.empty()) return " (the ranking is empty: the library offers no algorithm for these shapes and types)";
    std::string text = " (";
    if (failures.size() < entries_.size()) text += std::to_string(entries_.size() - failures.size()) + " failed earlier; ";
    for (size_t k = 0; k < failures.size(); ++k) {
      const RankedAlgorithm& entry = entries_[failures[k].first];
      if (k > 0) text += "; ";
      text += entry.name + ": ";
      text += failures[k].second == AttemptOutcome::not_supported
                  ? std::string("not supported")
                  : "its workspace of " + std::to_string(entry.workspace) + " bytes could not be allocated";
    }
    return text + ")";
  }

  std::vector<RankedAlgorithm> entries_;
  std::atomic<size_t> first_{0};
};

}  // namespace cnn::kernels
