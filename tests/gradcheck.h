// A finite-difference gradient checker for tests. The function under test maps float64 CPU inputs
// to one output y; the checker compares the tape's gradients of L = sum(w * y), for a fixed random
// projection w, against central differences (L(x + eps) - L(x - eps)) / (2 eps), element by element,
// and reports the worst element when any is outside atol + rtol * |numeric|.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "engine/cnn.h"

namespace cnn::testing {

struct GradCheckOptions {
  double eps = 1e-6;
  double rtol = 1e-5;
  double atol = 1e-7;
};

struct GradCheckResult {
  bool ok = true;
  std::string report;  // the worst element, or why the check could not run
};

using GradFn = std::function<Tensor(const std::vector<Tensor>&)>;

// `differentiable[i] == false` holds input i fixed (labels, soft targets, running statistics): it is
// neither perturbed nor checked, and may have any dtype. Empty: every input is differentiable.
GradCheckResult gradcheck(const GradFn& f, std::vector<Tensor> inputs, const GradCheckOptions& options = {},
                          const std::vector<bool>& differentiable = {});

// f64 values uniform in +-[margin, 1] (never within margin of zero), for ops with a kink at 0.
Tensor away_from_zero(const Shape& shape, uint64_t seed, double margin = 0.1);
// f64 values uniform in [low, high].
Tensor uniform64(const Shape& shape, uint64_t seed, double low = -1.0, double high = 1.0);

}  // namespace cnn::testing
