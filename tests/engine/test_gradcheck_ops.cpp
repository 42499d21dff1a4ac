// Finite-difference gradient checks (float64, central differences) of every case of the op table
// (tests/op_cases.cpp): every op of the engine, every broadcast pattern, the conv2d variants,
// batch norm in each mode, the pools, dropout, the casts and views. Each case is its own test,
// "gradcheck <case>". Inputs are kept away from kinks: relu and abs never see |x| < 0.1, log and
// sqrt see positive inputs, max_last and max_pool2d see distinct values.
#include <doctest/doctest.h>

#include "gradcheck.h"
#include "op_cases.h"

using namespace cnn;
using namespace cnn::testing;

namespace {
void check_gradients(const OpCase& c) {
  const HeldSetting setting(c);
  const GradCheckResult r =
      gradcheck(c.f, make_inputs(c, false, DType::f64), c.gradcheck_options, differentiable_inputs(c));
  INFO(r.report);
  CHECK(r.ok);
}
}  // namespace

CNN_OP_TESTS("gradcheck ", [](const OpCase& c) { return c.gradcheck; }, check_gradients);
