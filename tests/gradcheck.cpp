#include "gradcheck.h"

#include <cmath>
#include <cstring>
#include <sstream>

namespace cnn::testing {

namespace {
double projected(const Tensor& y, const std::vector<double>& w) {
  const std::vector<double> v = y.to_doubles();
  double total = 0;
  for (size_t i = 0; i < v.size(); ++i) total += v[i] * w[i];
  return total;
}
}  // namespace

GradCheckResult gradcheck(const GradFn& f, std::vector<Tensor> inputs, const GradCheckOptions& options,
                          const std::vector<bool>& differentiable) {
  GradCheckResult result;
  if (!differentiable.empty() && differentiable.size() != inputs.size()) {
    result.ok = false;
    result.report = "gradcheck: " + std::to_string(differentiable.size()) + " differentiable flags for " +
                    std::to_string(inputs.size()) + " inputs";
    return result;
  }
  const auto checked = [&](size_t i) { return differentiable.empty() || differentiable[i]; };
  for (size_t i = 0; i < inputs.size(); ++i) {
    Tensor& x = inputs[i];
    if (!checked(i)) continue;
    if (x.dtype() != DType::f64 || !x.device().is_cpu()) {
      result.ok = false;
      result.report = "gradcheck needs f64 CPU inputs, got " + describe(x);
      return result;
    }
    x.zero_grad();
    x.requires_grad_(true);
  }

  // Analytic gradients, seeded with the projection weights.
  Tape tape;
  Tensor y;
  {
    Tape::Recording rec(tape);
    y = f(inputs);
  }
  const Tensor w = Tensor::randn(y.shape(), 0xC0FFEE, DType::f64);
  const std::vector<double> wv = w.to_doubles();
  tape.backward(y, w);

  double worst_excess = -1;
  std::ostringstream worst;
  NoGrad no_grad;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!checked(i)) continue;
    Tensor& x = inputs[i];
    const Tensor g = x.grad();
    const std::vector<double> analytic = g.defined() ? g.to_doubles() : std::vector<double>(x.numel(), 0.0);
    double* data = x.data_as<double>();
    for (int64_t j = 0; j < x.numel(); ++j) {
      const double saved = data[j];
      data[j] = saved + options.eps;
      const double plus = projected(f(inputs), wv);
      data[j] = saved - options.eps;
      const double minus = projected(f(inputs), wv);
      data[j] = saved;
      const double numeric = (plus - minus) / (2 * options.eps);
      const double a = analytic[static_cast<size_t>(j)];
      const double err = std::fabs(a - numeric);
      const double allowed = options.atol + options.rtol * std::fabs(numeric);
      const double excess = err - allowed;
      if (!(err <= allowed)) result.ok = false;  // NaN fails too
      if (excess > worst_excess || std::isnan(err)) {
        worst_excess = std::isnan(err) ? INFINITY : excess;
        worst.str("");
        worst << "input " << i << " " << describe(x) << " element " << j << " (x=" << saved << "): analytic " << a
              << ", numeric " << numeric << ", abs error " << err << ", allowed " << allowed;
      }
    }
  }
  result.report = (result.ok ? "ok; closest to the tolerance: " : "gradient mismatch: worst ") + worst.str();
  return result;
}

Tensor away_from_zero(const Shape& shape, uint64_t seed, double margin) {
  Tensor u = Tensor::uniform(shape, -1.0, 1.0, seed, DType::f64);
  double* d = u.data_as<double>();
  for (int64_t i = 0; i < u.numel(); ++i) d[i] = (d[i] < 0 ? -1 : 1) * (margin + (1 - margin) * std::fabs(d[i]));
  return u;
}

Tensor uniform64(const Shape& shape, uint64_t seed, double low, double high) {
  return Tensor::uniform(shape, low, high, seed, DType::f64);
}

}  // namespace cnn::testing
