// The maximum of max pooling, max over an axis and the softmax's stabilising shift, written once for
// the CPU and CUDA kernels. PyTorch's rule (torch.max, amax, max_pool2d): NaN counts as greater than
// every number, so a NaN anywhere in a window or along an axis makes the maximum NaN and takes the
// argmax (the gradient); among equal values, and among several NaNs, the first (lowest index) wins.
#pragma once
#include <cstdint>

#include "kernels/common/host_device.h"

namespace cnn {

// True when `candidate`, met after `best` in a scan in index order, replaces it.
template <class C>
CNN_HD bool max_replaces(C candidate, C best) {
  // Branch-free (non-short-circuit) so that the CPU channel loops vectorise.
  return (candidate > best) | ((candidate != candidate) & (best == best));
}

// The maximum of two values under the rule above (NaN if either is NaN).
template <class C>
CNN_HD C max_of(C a, C b) {
  return max_replaces(b, a) ? b : a;
}

// The same rule for (value, index) pairs met in any order, as a tree reduction combines them:
// true when (candidate, candidate_index) is the better of the two pairs.
template <class C>
CNN_HD bool max_pair_replaces(C candidate, int64_t candidate_index, C best, int64_t best_index) {
  if (max_replaces(candidate, best)) return true;
  if (max_replaces(best, candidate)) return false;
  return candidate_index < best_index;  // equal values, or both NaN
}

}  // namespace cnn
