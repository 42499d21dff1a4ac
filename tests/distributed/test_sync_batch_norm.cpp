// SyncBN's code path in one process: batch_norm2d with a communicator of one rank runs the cross-rank
// combination (Chan's formula, the backward's all-reduced sums) and must give plain batch norm's
// results and exact gradients. The two-rank case is in test_mpi.cpp.
#include <doctest/doctest.h>

#include "engine/cnn.h"
#include "engine/distributed/communicator.h"
#include "engine/distributed/sync_batch_norm.h"
#include "gradcheck.h"

using namespace cnn;

TEST_CASE("SyncBN over one rank equals batch norm, forward, running statistics and backward") {
  auto comm = distributed::make_single_communicator();
  const Tensor x = testing::uniform64({4, 3, 3, 6}, 31, -2.0, 3.0);
  const Tensor w = testing::uniform64({6}, 32, 0.5, 1.5), b = testing::uniform64({6}, 33);
  for (BatchNormActivation act : {BatchNormActivation::none, BatchNormActivation::relu}) {
    Tensor rm1 = Tensor::zeros({6}, DType::f64), rv1 = Tensor::ones({6}, DType::f64);
    Tensor rm2 = rm1.clone(), rv2 = rv1.clone();
    const Tensor plain = batch_norm2d(x, w, b, rm1, rv1, true, 0.1, 1e-5, act);
    const Tensor synced = batch_norm2d(x, w, b, rm2, rv2, true, 0.1, 1e-5, act, Tensor(), comm.get());
    const auto close = [](const Tensor& a, const Tensor& c) {
      const std::vector<double> u = a.to_doubles(), v = c.to_doubles();
      double worst = 0;
      for (size_t i = 0; i < u.size(); ++i) worst = std::max(worst, std::abs(u[i] - v[i]));
      return worst;
    };
    CHECK(close(plain, synced) < 1e-12);
    CHECK(close(rm1, rm2) < 1e-14);
    CHECK(close(rv1, rv2) < 1e-14);
  }
  const auto synced_bn = [&](const std::vector<Tensor>& v) {
    return batch_norm2d(v[0], v[1], v[2], Tensor(), Tensor(), true, 0.1, 1e-5, BatchNormActivation::add_relu, v[3], comm.get());
  };
  const testing::GradCheckResult r = testing::gradcheck(synced_bn, {x, w, b, testing::uniform64({4, 3, 3, 6}, 34)});
  CHECK_MESSAGE(r.ok, r.report);
}

TEST_CASE("Chan's combination of batch statistics is exact for unequal counts") {
  auto comm = distributed::make_single_communicator();
  // One rank: the combination of one (count, mean, var) is itself.
  const Tensor mean = Tensor::from_vector<double>({1e4, -3.0}, {2}), var = Tensor::from_vector<double>({0.25, 9.0}, {2});
  const distributed::GlobalBatchStats global = distributed::combine_batch_stats(*comm, mean, var, 7);
  CHECK(global.mean.to_doubles() == mean.to_doubles());
  CHECK(global.var.to_doubles()[0] == doctest::Approx(0.25).epsilon(1e-12));
  CHECK(global.count.to_doubles() == std::vector<double>{7.0, 7.0});
}
