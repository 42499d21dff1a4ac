// Helpers of the CPU vs CUDA agreement tests: run an op on both backends from the same inputs,
// seed both backward passes with the same gradient, and compare outputs and input gradients.
#pragma once
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <functional>

#include "engine/cnn.h"
#include "op_cases.h"

namespace cnn::testing {

inline double max_rel_diff(const Tensor& a, const Tensor& b) {
  const std::vector<double> x = a.to_doubles(), y = b.to_doubles();
  REQUIRE(x.size() == y.size());
  double worst = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double d = std::fabs(x[i] - y[i]) / (1.0 + std::fabs(y[i]));
    worst = std::isnan(d) ? INFINITY : std::max(worst, d);
  }
  return worst;
}

// Runs f on CPU and CUDA copies of the inputs, seeds both backwards with the same random gradient,
// and compares the outputs and the gradients of the differentiable inputs within tol, then the
// fixed inputs, which an op may update in place (running statistics), within fixed_tol.
inline void expect_agreement(const OpFn& f, const std::vector<Tensor>& inputs, const std::vector<bool>& differentiable,
                             double tol, double fixed_tol) {
  REQUIRE(differentiable.size() == inputs.size());
  const auto grad = [&](size_t i) { return static_cast<bool>(differentiable[i]); };
  std::vector<Tensor> on_cpu, on_gpu;
  for (size_t i = 0; i < inputs.size(); ++i) {
    Tensor c = inputs[i].clone().detach();
    on_gpu.push_back(c.detach().to(Device::cuda()));
    if (grad(i)) {
      c.requires_grad_();
      on_gpu.back().requires_grad_();
    }
    on_cpu.push_back(c);
  }
  auto run = [&](std::vector<Tensor>& in) {
    Tape tape;
    Tensor y;
    {
      Tape::Recording rec(tape);
      y = f(in);
    }
    const Tensor seed = Tensor::randn(y.shape(), 77, y.dtype(), y.device());
    tape.backward(y, seed);
    return y;
  };
  const Tensor y_cpu = run(on_cpu), y_gpu = run(on_gpu);
  CHECK(y_gpu.device().is_cuda());
  CHECK(max_rel_diff(y_gpu, y_cpu) <= tol);
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (grad(i)) {
      INFO("gradient of input " << i);
      REQUIRE(on_cpu[i].grad().defined() == on_gpu[i].grad().defined());
      if (on_cpu[i].grad().defined()) CHECK(max_rel_diff(on_gpu[i].grad(), on_cpu[i].grad()) <= tol);
    } else {
      INFO("fixed input " << i << " after the run");
      CHECK(max_rel_diff(on_gpu[i], on_cpu[i]) <= fixed_tol);
    }
  }
}

inline Tensor u(const Shape& s, uint64_t seed, double lo = -2, double hi = 2) { return Tensor::uniform(s, lo, hi, seed); }

}  // namespace cnn::testing
