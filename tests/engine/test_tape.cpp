// The autograd tape: accumulation, NoGrad, freeing, error messages, gradient checkpointing.
#include <doctest/doctest.h>

#include "engine/cnn.h"

using namespace cnn;

TEST_CASE("gradients accumulate across backward calls until zeroed") {
  Tensor w = Tensor::from_vector<double>({1.0, 2.0}, {2}).requires_grad_();
  auto step = [&] {
    Tape tape;
    Tensor loss;
    {
      Tape::Recording rec(tape);
      loss = sum(mul(w, w));  // d/dw = 2w
    }
    tape.backward(loss);
  };
  step();
  CHECK(w.grad().to_doubles() == std::vector<double>{2.0, 4.0});
  step();
  CHECK(w.grad().to_doubles() == std::vector<double>{4.0, 8.0});
  w.zero_grad();
  CHECK(!w.grad().defined());
  step();
  CHECK(w.grad().to_doubles() == std::vector<double>{2.0, 4.0});
}

TEST_CASE("a tensor used twice receives the sum of both gradients") {
  Tensor x = Tensor::from_vector<double>({3.0}, {1}).requires_grad_();
  Tape tape;
  Tensor y;
  {
    Tape::Recording rec(tape);
    y = sum(add(mul(x, x), x));  // dy/dx = 2x + 1
  }
  tape.backward(y);
  CHECK(x.grad().item() == 7.0);
}

TEST_CASE("nothing is recorded without a recording scope or inside NoGrad") {
  Tensor x = Tensor::ones({3}, DType::f64).requires_grad_();
  Tape tape;
  {
    Tape::Recording rec(tape);
    {
      NoGrad no_grad;
      Tensor y = relu(x);
      CHECK(!y.requires_grad());
    }
    Tensor z = relu(x);
    CHECK(z.requires_grad());
  }
  CHECK(tape.size() == 1);
  Tensor w = relu(x);  // no scope open
  CHECK(!w.requires_grad());
  CHECK(tape.size() == 1);
}

TEST_CASE("backward frees saved tensors as it goes, and a second backward is an error") {
  Allocator& host = cpu_allocator();
  Tensor x = Tensor::randn({256, 256}, 1, DType::f64).requires_grad_();
  Tape tape;
  Tensor loss;
  size_t recorded = 0;
  {
    Tape::Recording rec(tape);
    Tensor h = x;
    for (int i = 0; i < 8; ++i) h = tanh(h);
    loss = sum(h);
  }
  recorded = host.stats().in_use;
  tape.backward(loss);
  // The eight saved activations (512 KiB each) are gone; only the gradient of x was added.
  CHECK(host.stats().in_use < recorded);
  CHECK_THROWS_WITH_AS(tape.backward(loss), doctest::Contains("backward called twice"), Error);
}

TEST_CASE("backward of a non-scalar needs a seed") {
  Tensor x = Tensor::ones({2, 2}, DType::f64).requires_grad_();
  Tape tape;
  Tensor y;
  {
    Tape::Recording rec(tape);
    y = relu(x);
  }
  CHECK_THROWS_WITH_AS(tape.backward(y), doctest::Contains("non-scalar tensor [2, 2] f64 cpu needs a seed"), Error);
  Tape tape2;
  {
    Tape::Recording rec(tape2);
    y = scale(x, 3.0);
  }
  tape2.backward(y, Tensor::ones({2, 2}, DType::f64));
  CHECK(x.grad().to_doubles() == std::vector<double>{3, 3, 3, 3});
}

TEST_CASE("gradient checkpointing gives identical gradients with a lower memory peak") {
  // A deep chain of blocks; each block is tanh(linear(h, w_i)).
  constexpr int kBlocks = 12;
  std::vector<Tensor> weights;
  for (int i = 0; i < kBlocks; ++i)
    weights.push_back(scale(Tensor::randn({128, 128}, 100 + i, DType::f64), 0.1).requires_grad_());
  const Tensor input = Tensor::randn({512, 128}, 7, DType::f64);

  auto run = [&](bool use_checkpoint) {
    for (Tensor& w : weights) w.zero_grad();
    Allocator& host = cpu_allocator();
    host.reset_peak();
    const size_t base = host.stats().in_use;
    Tape tape;
    Tensor loss;
    {
      Tape::Recording rec(tape);
      Tensor h = input;
      for (int i = 0; i < kBlocks; ++i) {
        const Tensor& w = weights[static_cast<size_t>(i)];
        auto block = [&w](const std::vector<Tensor>& in) {
          Tensor a = tanh(linear(in[0], w));
          return std::vector<Tensor>{tanh(linear(a, w))};
        };
        h = use_checkpoint ? checkpoint(block, {h})[0] : block({h})[0];
      }
      loss = mean(h);
    }
    tape.backward(loss);
    std::vector<std::vector<double>> grads;
    for (Tensor& w : weights) grads.push_back(w.grad().to_doubles());
    return std::make_pair(grads, host.stats().peak_in_use - base);
  };
  const auto [plain_grads, plain_peak] = run(false);
  const auto [ckpt_grads, ckpt_peak] = run(true);
  CHECK(plain_grads == ckpt_grads);  // bitwise: the replay computes exactly the same values
  MESSAGE("peak bytes above baseline: plain " << plain_peak << ", checkpointed " << ckpt_peak);
  CHECK(ckpt_peak < plain_peak * 2 / 3);
}
