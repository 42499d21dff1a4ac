// Helpers of the CPU vs CUDA agreement tests: run an op on both backends from the same inputs,
// seed both backward passes with the same gradient, and compare outputs and input gradients.
#pragma once
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <functional>

#include "engine/cnn.h"

namespace cnn::testing {

using OpFn = std::function<Tensor(const std::vector<Tensor>&)>;

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

// Runs f on CPU and CUDA copies of the inputs (converted to dtype), seeds both backwards with the
// same random gradient, and compares outputs and input gradients.
inline void expect_agreement(const OpFn& f, const std::vector<Tensor>& inputs, double tol, DType dtype = DType::f32) {
  std::vector<Tensor> on_cpu, on_gpu;
  for (const Tensor& x : inputs) {
    Tensor c = x.to(dtype).detach();
    if (is_floating(dtype)) c.requires_grad_();
    on_cpu.push_back(c);
    on_gpu.push_back(c.detach().to(Device::cuda()).requires_grad_());
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
    INFO("gradient of input " << i);
    REQUIRE(on_cpu[i].grad().defined() == on_gpu[i].grad().defined());
    if (on_cpu[i].grad().defined()) CHECK(max_rel_diff(on_gpu[i].grad(), on_cpu[i].grad()) <= tol);
  }
}

inline Tensor u(const Shape& s, uint64_t seed, double lo = -2, double hi = 2) { return Tensor::uniform(s, lo, hi, seed); }

}  // namespace cnn::testing
