// GradientReducer's buckets and its bookkeeping, in one process (the single communicator: the
// average over one rank is the gradient itself). The cross-rank averaging is tested under mpirun
// (tests/distributed/test_mpi.cpp).
#include <doctest/doctest.h>

#include "engine/cnn.h"
#include "engine/distributed/communicator.h"
#include "train/distributed/gradient_reducer.h"

using namespace cnn;
using cnn::train::GradientReducer;

namespace {
std::vector<Tensor> parameters_of_sizes(const std::vector<int64_t>& sizes) {
  std::vector<Tensor> params;
  for (size_t i = 0; i < sizes.size(); ++i)
    params.push_back(Tensor::randn({sizes[i]}, 10 + i, DType::f32).requires_grad_());
  return params;
}

// A loss that reaches every parameter: sum of (i + 1) * p_i^2 over all of them.
void backward_through(const std::vector<Tensor>& params, GradientReducer* reducer) {
  Tape tape;
  if (reducer) reducer->attach(tape);
  Tensor loss;
  {
    Tape::Recording rec(tape);
    for (size_t i = 0; i < params.size(); ++i) {
      const Tensor term = scale(sum(mul(params[i], params[i])), static_cast<double>(i + 1));
      loss = loss.defined() ? add(loss, term) : term;
    }
  }
  tape.backward(loss);
}
}  // namespace

TEST_CASE("gradient buckets: reverse registration order, split by size, an oversized parameter alone") {
  auto comm = distributed::make_single_communicator();
  // 4 bytes each: a bucket of 400 bytes holds 100 values.
  const std::vector<Tensor> params = parameters_of_sizes({30, 30, 250, 10, 10, 10, 60});
  GradientReducer reducer(*comm, params, 400);
  const auto& buckets = reducer.buckets();
  REQUIRE(buckets.size() == 3);
  CHECK(buckets[0].members == std::vector<size_t>{6, 5, 4, 3});  // 60 + 10 + 10 + 10 = 90 values
  CHECK(buckets[1].members == std::vector<size_t>{2});           // 250 values: larger than a bucket
  CHECK(buckets[2].members == std::vector<size_t>{1, 0});
  CHECK(buckets[2].offsets == std::vector<int64_t>{0, 30});
  CHECK(buckets[0].numel == 90);
}

TEST_CASE("gradient buckets: many tiny parameters share one bucket and come back unchanged on one rank") {
  auto comm = distributed::make_single_communicator();
  const std::vector<Tensor> params = parameters_of_sizes(std::vector<int64_t>(50, 3));
  GradientReducer reducer(*comm, params, 25.0 * (1 << 20));
  CHECK(reducer.buckets().size() == 1);
  backward_through(params, &reducer);
  std::vector<std::vector<double>> before;
  for (const Tensor& p : params) before.push_back(p.grad().to_doubles());
  reducer.finish();
  CHECK(reducer.reports() == 50);  // the hook fired once per parameter
  for (size_t i = 0; i < params.size(); ++i) CHECK(params[i].grad().to_doubles() == before[i]);
}

TEST_CASE("gradient reducer: a parameter backward never reached keeps no gradient, and accumulation needs attaching once") {
  auto comm = distributed::make_single_communicator();
  std::vector<Tensor> params = parameters_of_sizes({4, 4});
  Tensor unused = Tensor::randn({4}, 99, DType::f32).requires_grad_();
  std::vector<Tensor> all = params;
  all.push_back(unused);
  GradientReducer reducer(*comm, all, 1024);
  backward_through(params, nullptr);  // an earlier micro-batch: no communication (no_sync)
  backward_through(params, &reducer);
  reducer.finish();
  CHECK(reducer.reports() == 2);
  CHECK_FALSE(unused.grad().defined());
  // Two micro-batches accumulated: d/dp (i+1) p^2 = 2 (i+1) p, twice.
  const std::vector<double> p1 = params[1].to_doubles(), g1 = params[1].grad().to_doubles();
  for (size_t k = 0; k < p1.size(); ++k) CHECK(g1[k] == doctest::Approx(2 * 2 * 2 * p1[k]));
  Tape tape;
  reducer.attach(tape);
  CHECK_THROWS_AS(reducer.attach(tape), Error);  // the previous step was not finished
}
