// A two-layer MLP end to end: its gradient check, and plain gradient descent that fits a small
// problem (the loss must fall by a wide margin).
#include <doctest/doctest.h>

#include "engine/cnn.h"
#include "gradcheck.h"

using namespace cnn;
using namespace cnn::testing;

TEST_CASE("gradcheck two-layer MLP with cross-entropy") {
  const Tensor labels = Tensor::from_vector<int64_t>({0, 2, 1, 2, 0}, {5});
  const GradCheckResult r = gradcheck(
      [labels](const std::vector<Tensor>& p) {
        const Tensor h = tanh(linear(p[0], p[1], p[2]));
        return cross_entropy(linear(h, p[3], p[4]), labels, 0.05);
      },
      {uniform64({5, 4}, 1), uniform64({6, 4}, 2), uniform64({6}, 3), uniform64({3, 6}, 4), uniform64({3}, 5)});
  INFO(r.report);
  CHECK(r.ok);
}

TEST_CASE("an MLP trained with gradient descent drives its loss down") {
  // Two Gaussian blobs per class in 8 dimensions; the label is determined by the blob.
  constexpr int kRows = 64, kIn = 8, kHidden = 16, kClasses = 4;
  const Tensor centers = Tensor::randn({kClasses, kIn}, 11);
  std::vector<float> xs;
  std::vector<int64_t> ys;
  const std::vector<double> c = centers.to_doubles();
  const std::vector<double> noise = Tensor::randn({kRows, kIn}, 12).to_doubles();
  for (int r = 0; r < kRows; ++r) {
    const int label = r % kClasses;
    ys.push_back(label);
    for (int k = 0; k < kIn; ++k) xs.push_back(static_cast<float>(2.0 * c[label * kIn + k] + 0.3 * noise[r * kIn + k]));
  }
  const Tensor x = Tensor::from_vector(xs, {kRows, kIn});
  const Tensor y = Tensor::from_vector(ys, {kRows});
  std::vector<Tensor> params = {scale(Tensor::randn({kHidden, kIn}, 1), 0.3), Tensor::zeros({kHidden}),
                                scale(Tensor::randn({kClasses, kHidden}, 2), 0.3), Tensor::zeros({kClasses})};
  for (Tensor& p : params) p.requires_grad_();
  double first = 0, last = 0;
  for (int step = 0; step < 60; ++step) {
    Tape tape;
    Tensor loss;
    {
      Tape::Recording rec(tape);
      loss = cross_entropy(linear(relu(linear(x, params[0], params[1])), params[2], params[3]), y);
    }
    tape.backward(loss);
    NoGrad no_grad;
    for (Tensor& p : params) {
      add_(p, scale(p.grad(), -0.5));
      p.zero_grad();
    }
    (step == 0 ? first : last) = loss.item();
  }
  MESSAGE("loss " << first << " -> " << last);
  CHECK(first > 1.0);
  CHECK(last < 0.1 * first);
}
