// The NCCL backend (engine/distributed/nccl_communicator.cpp) on one GPU with world size 1: every
// collective gives back its input (sum, average and max over one rank are the identity), all_gather
// stacks it under a new first axis, and tensors the communicator cannot take are refused. Without a
// CUDA device each case says so and passes.
#include <doctest/doctest.h>

#include "engine/config.h"

#if CNN_WITH_NCCL
#include <string>
#include <vector>

#include "engine/cnn.h"
#include "engine/distributed/backends.h"
#include "layers/registry.h"
#include "train/distributed/gradient_reducer.h"
#include "distributed/ddp_backward.h"

using namespace cnn;
using namespace cnn::distributed;

namespace {

CommunicatorPtr one_rank_communicator() {
  World world;  // rank 0 of 1, no launcher
  return make_nccl_communicator(world, 0, nccl_unique_id(), 60);
}

// 1000 values in -100..99: integers, so exact in every dtype (bf16 included).
Tensor values_on_gpu(DType dtype) {
  std::vector<double> values(1000);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<double>(i % 200) - 100.0;
  return Tensor::from_vector(values, {1000}).to(dtype).to(Device::cuda(0));
}

}  // namespace

TEST_CASE("nccl: all_reduce over one rank gives back its input, for every dtype and op") {
  if (!cuda::is_available()) {
    MESSAGE("skipped: no CUDA device");
    return;
  }
  CommunicatorPtr comm = one_rank_communicator();
  CHECK(std::string(comm->backend()) == "nccl");
  CHECK(comm->device() == Device::cuda(0));
  CHECK(comm->world_size() == 1);
  for (DType dtype : {DType::f32, DType::f16, DType::bf16, DType::f64, DType::i64}) {
    for (ReduceOp op : {ReduceOp::sum, ReduceOp::average, ReduceOp::max}) {
      const char* dtype_text = dtype_name(dtype);
      const char* op_text = reduce_op_name(op);
      CAPTURE(dtype_text);
      CAPTURE(op_text);
      Tensor t = values_on_gpu(dtype);
      const std::vector<double> before = t.to_doubles();
      comm->all_reduce(t, op);
      CHECK(t.dtype() == dtype);
      CHECK(t.to_doubles() == before);
    }
  }
  // The asynchronous form: the compute stream waits for the collective; waiting twice is harmless.
  Tensor t = values_on_gpu(DType::f32);
  const std::vector<double> before = t.to_doubles();
  Pending pending = comm->all_reduce_async(t, ReduceOp::sum);
  pending->wait();
  pending->wait();
  CHECK(t.to_doubles() == before);
}

TEST_CASE("nccl: broadcast keeps the values, all_gather stacks them, barrier returns") {
  if (!cuda::is_available()) {
    MESSAGE("skipped: no CUDA device");
    return;
  }
  CommunicatorPtr comm = one_rank_communicator();
  Tensor t = values_on_gpu(DType::f32).reshape({10, 100});
  const std::vector<double> before = t.to_doubles();
  comm->broadcast(t, 0);
  CHECK(t.to_doubles() == before);
  CHECK_THROWS_AS(comm->broadcast(t, 1), Error);  // no rank 1 in a job of one

  Tensor gathered = comm->all_gather(t);
  CHECK(gathered.shape() == Shape{1, 10, 100});
  CHECK(gathered.dtype() == DType::f32);
  CHECK(gathered.device() == Device::cuda(0));
  CHECK(gathered.to_doubles() == before);

  comm->barrier();
  comm->barrier();
}

TEST_CASE("nccl: the tensors of a communicator that is gone can be freed, and the next allocation works") {
  // Before, the destructor destroyed the communication stream while blocks still named it (every
  // collective records it on its tensors; the barrier's value was freed after the stream): the
  // event of their free could not be recorded, and the next allocation failed with that error.
  if (!cuda::is_available()) {
    MESSAGE("skipped: no CUDA device");
    return;
  }
  Tensor t = values_on_gpu(DType::f32);
  const std::vector<double> before = t.to_doubles();
  {
    CommunicatorPtr comm = one_rank_communicator();
    comm->all_reduce(t, ReduceOp::sum);
    comm->barrier();
  }  // the communicator, with its barrier value, is gone; t is still held
  t = Tensor();  // freed now: an event on the communication stream
  Tensor next;
  CHECK_NOTHROW(next = values_on_gpu(DType::f32));
  CHECK(next.to_doubles() == before);
  // A second communicator (taking the stream the first gave back) works as the first did.
  CommunicatorPtr again = one_rank_communicator();
  again->all_reduce(next, ReduceOp::sum);
  CHECK(next.to_doubles() == before);
}

TEST_CASE("nccl: CPU tensors are refused") {
  if (!cuda::is_available()) {
    MESSAGE("skipped: no CUDA device");
    return;
  }
  CommunicatorPtr comm = one_rank_communicator();
  Tensor cpu = Tensor::ones({4});
  CHECK_THROWS_AS(comm->all_reduce(cpu, ReduceOp::sum), Error);
  CHECK_THROWS_AS(comm->all_reduce_async(cpu, ReduceOp::average), Error);
  CHECK_THROWS_AS(comm->broadcast(cpu, 0), Error);
  CHECK_THROWS_AS(comm->all_gather(cpu), Error);
  comm->barrier();  // the communicator still works after refusing
}

TEST_CASE("nccl: a data-parallel step on one GPU gives the gradients of the plain step, SyncBN over NCCL is batch norm") {
  if (!cuda::is_available()) {
    MESSAGE("skipped: no CUDA device");
    return;
  }
  CommunicatorPtr comm = one_rank_communicator();
  const auto gradients = [&](bool data_parallel) {
    auto model = make_model("compact_cnn", 10, 1, 3, ModelOptions{.dropout = 0.0});
    model->to(Device::cuda(0));
    model->train();
    std::unique_ptr<train::GradientReducer> reducer;
    if (data_parallel) reducer = std::make_unique<train::GradientReducer>(*comm, model->parameters(), 16 * 1024);
    const Tensor images = Tensor::randn({16, 28, 28, 1}, 8).to(Device::cuda(0));
    const Tensor labels = Tensor::from_vector<int64_t>(std::vector<int64_t>(16, 3), {16}).to(Device::cuda(0));
    testing::ddp_backward(*model, images, labels, reducer.get());
    std::vector<std::vector<double>> grads;
    for (const Tensor& p : model->parameters()) grads.push_back(p.grad().to_doubles());
    return grads;
  };
  CHECK(gradients(true) == gradients(false));  // the average over one rank is exact

  const Tensor x = Tensor::randn({8, 4, 4, 16}, 9).to(Device::cuda(0));
  Tensor rm = Tensor::zeros({16}, DType::f32, Device::cuda(0)), rv = Tensor::ones({16}, DType::f32, Device::cuda(0));
  const std::vector<double> plain = batch_norm2d(x, Tensor(), Tensor(), rm.clone(), rv.clone(), true).to_doubles();
  const std::vector<double> synced =
      batch_norm2d(x, Tensor(), Tensor(), rm, rv, true, 0.1, 1e-5, BatchNormActivation::none, Tensor(), comm.get()).to_doubles();
  double worst = 0;
  for (size_t i = 0; i < plain.size(); ++i) worst = std::max(worst, std::abs(plain[i] - synced[i]));
  CHECK(worst < 1e-5);
}

#endif  // CNN_WITH_NCCL
