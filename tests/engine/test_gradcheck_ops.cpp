// Finite-difference gradient checks (float64, central differences) for every op of the engine and
// every broadcast pattern. Inputs are kept away from kinks: relu and abs never see |x| < 0.1, log
// and sqrt see positive inputs, max_last sees distinct values.
#include <doctest/doctest.h>

#include "engine/cnn.h"
#include "gradcheck.h"

using namespace cnn;
using namespace cnn::testing;

namespace {
void expect_gradients(const GradFn& f, std::vector<Tensor> inputs, GradCheckOptions options = {}) {
  const GradCheckResult r = gradcheck(f, std::move(inputs), options);
  INFO(r.report);
  CHECK(r.ok);
}

void check_unary(Tensor (*op)(const Tensor&), const Tensor& x) {
  expect_gradients([op](const std::vector<Tensor>& in) { return op(in[0]); }, {x});
}
}  // namespace

TEST_CASE("gradcheck relu") { check_unary(relu, away_from_zero({3, 5}, 1)); }
TEST_CASE("gradcheck silu") { check_unary(silu, uniform64({3, 5}, 2, -3, 3)); }
TEST_CASE("gradcheck sigmoid") { check_unary(sigmoid, uniform64({3, 5}, 3, -3, 3)); }
TEST_CASE("gradcheck tanh") { check_unary(tanh, uniform64({3, 5}, 4, -2, 2)); }
TEST_CASE("gradcheck gelu (erf)") {
  expect_gradients([](const std::vector<Tensor>& in) { return gelu(in[0]); }, {uniform64({3, 5}, 5, -3, 3)});
}
TEST_CASE("gradcheck gelu (tanh approximation)") {
  expect_gradients([](const std::vector<Tensor>& in) { return gelu(in[0], GeluApproximation::tanh); },
                   {uniform64({3, 5}, 6, -3, 3)});
}
TEST_CASE("gradcheck exp") { check_unary(exp, uniform64({3, 5}, 7, -2, 2)); }
TEST_CASE("gradcheck log") { check_unary(log, uniform64({3, 5}, 8, 0.2, 3)); }
TEST_CASE("gradcheck neg") { check_unary(neg, uniform64({3, 5}, 9)); }
TEST_CASE("gradcheck abs") { check_unary(abs, away_from_zero({3, 5}, 10)); }
TEST_CASE("gradcheck sqrt") { check_unary(sqrt, uniform64({3, 5}, 11, 0.2, 3)); }
TEST_CASE("gradcheck pow by scalar") {
  expect_gradients([](const std::vector<Tensor>& in) { return pow(in[0], 2.5); }, {uniform64({3, 5}, 12, 0.2, 2)});
  expect_gradients([](const std::vector<Tensor>& in) { return pow(in[0], 3.0); }, {uniform64({3, 5}, 13, -2, 2)});
}
TEST_CASE("gradcheck scale and shift by scalar") {
  expect_gradients([](const std::vector<Tensor>& in) { return affine(in[0], -1.5, 0.25); }, {uniform64({4}, 14)});
  expect_gradients([](const std::vector<Tensor>& in) { return shift(scale(in[0], 3.0), 2.0); }, {uniform64({4}, 15)});
}

// ---- binary ops, each broadcast pattern ----

namespace {
using BinaryFn = Tensor (*)(const Tensor&, const Tensor&);
struct Pattern {
  const char* name;
  Shape a, b;
};
const Pattern kPatterns[] = {
    {"same shape", {2, 3, 4}, {2, 3, 4}},
    {"scalar right", {2, 3, 4}, {1}},
    {"scalar left", {}, {2, 3}},
    {"[C] against [N,H,W,C]", {2, 3, 2, 4}, {4}},
    {"[N,H,W,C] against [C]", {4}, {2, 2, 3, 4}},
    {"[N,1,1,C] against [N,H,W,C]", {2, 3, 3, 4}, {2, 1, 1, 4}},
    {"[N,H,W,C] against [N,1,1,C]", {2, 1, 1, 4}, {2, 2, 3, 4}},
};

void check_binary(BinaryFn op, bool positive_b) {
  uint64_t seed = 100;
  for (const Pattern& p : kPatterns) {
    INFO("broadcast pattern: " << p.name);
    Tensor a = uniform64(p.a, seed++, -1, 1);
    Tensor b = positive_b ? uniform64(p.b, seed++, 0.5, 2) : uniform64(p.b, seed++, -1, 1);
    expect_gradients([op](const std::vector<Tensor>& in) { return op(in[0], in[1]); }, {a, b});
  }
}
}  // namespace

TEST_CASE("gradcheck add, all broadcast patterns") { check_binary(add, false); }
TEST_CASE("gradcheck sub, all broadcast patterns") { check_binary(sub, false); }
TEST_CASE("gradcheck mul, all broadcast patterns") { check_binary(mul, false); }
TEST_CASE("gradcheck div, all broadcast patterns") { check_binary(div, true); }

// ---- reductions ----

TEST_CASE("gradcheck sum and mean over all elements") {
  expect_gradients([](const std::vector<Tensor>& in) { return sum(in[0]); }, {uniform64({3, 4}, 20)});
  expect_gradients([](const std::vector<Tensor>& in) { return mean(in[0]); }, {uniform64({3, 4}, 21)});
}
TEST_CASE("gradcheck sum and mean over chosen axes") {
  const Tensor x = uniform64({2, 3, 4, 5}, 22);
  for (const std::vector<int>& axes : std::vector<std::vector<int>>{{0}, {3}, {1, 2}, {0, 2}, {-1, 1}, {0, 1, 2, 3}}) {
    for (bool keepdim : {false, true}) {
      INFO("axes " << axes.size() << " keepdim " << keepdim);
      expect_gradients([axes, keepdim](const std::vector<Tensor>& in) { return sum(in[0], axes, keepdim); }, {x});
      expect_gradients([axes, keepdim](const std::vector<Tensor>& in) { return mean(in[0], axes, keepdim); }, {x});
    }
  }
}
TEST_CASE("gradcheck max over the last axis") {
  expect_gradients([](const std::vector<Tensor>& in) { return max_last(in[0]).first; }, {uniform64({4, 7}, 23)});
}

// ---- matrix products ----

TEST_CASE("gradcheck matmul") {
  expect_gradients([](const std::vector<Tensor>& in) { return matmul(in[0], in[1]); },
                   {uniform64({3, 4}, 30), uniform64({4, 5}, 31)});
}
TEST_CASE("gradcheck linear with and without bias") {
  expect_gradients([](const std::vector<Tensor>& in) { return linear(in[0], in[1], in[2]); },
                   {uniform64({2, 3, 4}, 32), uniform64({5, 4}, 33), uniform64({5}, 34)});
  expect_gradients([](const std::vector<Tensor>& in) { return linear(in[0], in[1]); },
                   {uniform64({3, 4}, 35), uniform64({2, 4}, 36)});
}

// ---- softmax family ----

TEST_CASE("gradcheck softmax") {
  expect_gradients([](const std::vector<Tensor>& in) { return softmax(in[0]); }, {uniform64({3, 6}, 40, -3, 3)});
}
TEST_CASE("gradcheck log_softmax") {
  expect_gradients([](const std::vector<Tensor>& in) { return log_softmax(in[0]); }, {uniform64({3, 6}, 41, -3, 3)});
}
TEST_CASE("gradcheck cross_entropy with integer labels, with and without label smoothing") {
  const Tensor labels = Tensor::from_vector<int64_t>({2, 0, 5, 3}, {4});
  for (double smoothing : {0.0, 0.1}) {
    INFO("label smoothing " << smoothing);
    expect_gradients([labels, smoothing](const std::vector<Tensor>& in) { return cross_entropy(in[0], labels, smoothing); },
                     {uniform64({4, 6}, 42, -3, 3)});
  }
}
TEST_CASE("gradcheck cross_entropy with soft targets") {
  const Tensor targets = softmax(uniform64({4, 6}, 43, -2, 2));
  expect_gradients([targets](const std::vector<Tensor>& in) { return cross_entropy_soft(in[0], targets); },
                   {uniform64({4, 6}, 44, -3, 3)});
}

// ---- dtype and views ----

TEST_CASE("gradcheck cast through f32 and f16") {
  // Rounding to f32/f16 limits how well central differences resolve the (unit) derivative.
  GradCheckOptions loose;
  loose.eps = 0.1;  // the derivative is constant, so a wide step loses nothing
  loose.rtol = 1e-2;
  loose.atol = 1e-2;
  expect_gradients([](const std::vector<Tensor>& in) { return cast(cast(in[0], DType::f32), DType::f64); },
                   {uniform64({5}, 50)}, loose);
  expect_gradients([](const std::vector<Tensor>& in) { return cast(scale(cast(in[0], DType::f16), 2.0), DType::f64); },
                   {uniform64({5}, 51)}, loose);
}
TEST_CASE("gradcheck reshape and slice views") {
  expect_gradients([](const std::vector<Tensor>& in) { return tanh(in[0].reshape({4, 3})); }, {uniform64({2, 6}, 52)});
  expect_gradients([](const std::vector<Tensor>& in) { return tanh(in[0].slice(1, 3)); }, {uniform64({4, 3}, 53)});
}
