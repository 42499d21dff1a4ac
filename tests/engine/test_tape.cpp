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

// The gradient-ready hook (Tape::set_gradient_ready_hook), which data-parallel training starts its
// bucket all-reduces from: once per leaf, and only when nothing more will be added to its .grad.
namespace {
struct ReadyLog {
  std::vector<uint64_t> ids;
  std::vector<double> grad_sums;  // the leaf's gradient when it was reported
  void operator()(const Tensor& leaf) {
    ids.push_back(leaf.id());
    grad_sums.push_back(sum(leaf.grad()).item());
  }
  size_t count(const Tensor& leaf) const { return static_cast<size_t>(std::count(ids.begin(), ids.end(), leaf.id())); }
};
}  // namespace

TEST_CASE("the gradient-ready hook fires once per leaf, after its last contribution") {
  Tensor w1 = Tensor::from_vector<double>({1, 2, 3, 4}, {2, 2}).requires_grad_();
  Tensor w2 = Tensor::from_vector<double>({0.5, -1, 2, 1}, {2, 2}).requires_grad_();
  Tensor x = Tensor::from_vector<double>({1, -2}, {1, 2});
  Tape tape;
  ReadyLog log;
  tape.set_gradient_ready_hook([&](const Tensor& leaf) { log(leaf); });
  Tensor loss;
  {
    Tape::Recording rec(tape);
    // w1 is used twice, far apart: first (earliest record) and again after w2.
    const Tensor h = relu(linear(x, w1));
    loss = sum(linear(linear(h, w2), w1));
  }
  tape.backward(loss);
  REQUIRE(log.ids.size() == 2);
  CHECK(log.count(w1) == 1);
  CHECK(log.count(w2) == 1);
  CHECK(log.ids[0] == w2.id());  // w2's only record comes after w1's first one: it is final first
  // The gradient at report time is the final one.
  CHECK(log.grad_sums[1] == doctest::Approx(sum(w1.grad()).item()));
}

TEST_CASE("the gradient-ready hook reports leaves inside checkpointed segments once, after the segment's replay") {
  Tensor w1 = Tensor::randn({3, 3}, 1, DType::f64).requires_grad_();
  Tensor w2 = Tensor::randn({3, 3}, 2, DType::f64).requires_grad_();
  Tensor x = Tensor::randn({2, 3}, 3, DType::f64).requires_grad_();
  Tape tape;
  ReadyLog log;
  tape.set_gradient_ready_hook([&](const Tensor& leaf) { log(leaf); });
  Tensor loss;
  {
    Tape::Recording rec(tape);
    const Tensor h = checkpoint([&](const std::vector<Tensor>& in) { return std::vector<Tensor>{tanh(linear(in[0], w1))}; },
                                {x})[0];
    loss = sum(linear(h, w2));
  }
  tape.backward(loss);
  CHECK(log.count(w1) == 1);
  CHECK(log.count(w2) == 1);
  CHECK(log.count(x) == 1);
  CHECK(log.ids.size() == 3);
}

TEST_CASE("a parameter used inside a checkpointed segment and again earlier is reported once, by the outer walk") {
  Tensor w = Tensor::randn({3, 3}, 4, DType::f64).requires_grad_();
  Tensor x = Tensor::randn({2, 3}, 5, DType::f64);
  Tape tape;
  ReadyLog log;
  tape.set_gradient_ready_hook([&](const Tensor& leaf) { log(leaf); });
  Tensor loss;
  {
    Tape::Recording rec(tape);
    const Tensor h = linear(x, w);  // the earliest use, outside the segment
    const Tensor g = checkpoint([&](const std::vector<Tensor>& in) { return std::vector<Tensor>{tanh(linear(in[0], w))}; }, {h})[0];
    loss = sum(g);
  }
  tape.backward(loss);
  REQUIRE(log.count(w) == 1);
  CHECK(log.grad_sums[0] == doctest::Approx(sum(w.grad()).item()));
}

TEST_CASE("a parameter used in two checkpointed segments is refused when the hook needs its final gradient") {
  Tensor w = Tensor::randn({3, 3}, 6, DType::f64).requires_grad_();
  Tensor x = Tensor::randn({2, 3}, 7, DType::f64);
  const CheckpointFn block = [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{tanh(linear(in[0], w))}; };
  Tape tape;
  tape.set_gradient_ready_hook([](const Tensor&) {});
  Tensor loss;
  {
    Tape::Recording rec(tape);
    loss = sum(checkpoint(block, {checkpoint(block, {x})[0]})[0]);
  }
  CHECK_THROWS_WITH_AS(tape.backward(loss), doctest::Contains("two checkpointed segments"), Error);
  // Without a hook the same graph is fine.
  w.zero_grad();
  Tape plain;
  {
    Tape::Recording rec(plain);
    loss = sum(checkpoint(block, {checkpoint(block, {x})[0]})[0]);
  }
  plain.backward(loss);
  CHECK(w.grad().defined());
}

namespace {
// y = a (a copy), whose rule adds its gradient into the one the tape already gathered for a when
// the tape offers it (gradient_to_accumulate), and says whether it was offered.
Tensor copy_adding_into_gathered(const Tensor& a, bool* offered) {
  Tensor y = a.clone();
  record_op("copy_adding_into_gathered", {a}, {y}, [offered](const std::vector<Tensor>& grads) -> std::vector<Tensor> {
    Tensor into = gradient_to_accumulate(0);
    *offered = into.defined();
    if (!into.defined()) return {grads[0].clone()};
    add_(into, grads[0]);
    return {into};
  });
  return y;
}
}  // namespace

TEST_CASE("tape: a rule may add its gradient into the one already gathered for an input, once") {
  CHECK_FALSE(gradient_to_accumulate(0).defined());  // outside a rule
  Tensor x = Tensor::from_vector<double>({1, -2, 3}, {3}).requires_grad_();
  const Tensor r = Tensor::from_vector<double>({0.5, 4, -1}, {3});
  bool offered = false;
  Tape tape;
  Tensor loss;
  {
    Tape::Recording recording(tape);
    const Tensor a = add(x, x);  // not a leaf: its gradient is gathered by the tape
    // Recorded first, so its rule runs last, when mul's gradient for a is already there.
    const Tensor y = copy_adding_into_gathered(a, &offered);
    loss = add(sum(y), sum(mul(a, r)));
  }
  tape.backward(loss);
  CHECK(offered);
  // d loss / d a = 1 + r, counted once (the tape did not add the returned sum to itself again).
  CHECK(x.grad().to_doubles() == std::vector<double>{3, 10, 0});
}

TEST_CASE("tape: nothing to add into for the first gradient of an input, nor for an input taken twice by one op") {
  Tensor x = Tensor::from_vector<double>({1, 2}, {2}).requires_grad_();
  const Tensor r = Tensor::from_vector<double>({0.5, 4}, {2});
  bool first_offered = true;
  std::vector<bool> twice_offered;
  Tape tape;
  Tensor loss;
  {
    Tape::Recording recording(tape);
    const Tensor a = add(x, x);
    const Tensor y = copy_adding_into_gathered(a, &first_offered);  // a's only consumer
    Tensor z = y.clone();
    record_op("takes_y_twice", {y, y}, {z}, [&twice_offered](const std::vector<Tensor>& grads) -> std::vector<Tensor> {
      twice_offered = {gradient_to_accumulate(0).defined(), gradient_to_accumulate(1).defined()};
      return {grads[0], Tensor()};
    });
    // Recorded after z, so y's gradient from mul is already gathered when takes_y_twice runs.
    loss = add(sum(z), sum(mul(y, r)));
  }
  tape.backward(loss);
  CHECK_FALSE(first_offered);
  CHECK(twice_offered == std::vector<bool>{false, false});
  CHECK(x.grad().to_doubles() == std::vector<double>{3, 10});  // 2 * (1 + r)
}
