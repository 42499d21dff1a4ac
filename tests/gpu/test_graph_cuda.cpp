// CUDA graphs on a GPU (engine/graph.h, train/step_graph.h): a captured stretch runs nothing at the
// capture and its recorded kernels at each replay, reading new inputs from the tensors the capture
// read; and a training run with [train] cuda_graphs equals the eager run bit for bit (deterministic
// algorithms, so that cuDNN picks the same kernels in both).
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "engine/cnn.h"
#include "engine/graph.h"
#include "train/small_run.h"

#if CNN_WITH_CUDA
#include <cuda_runtime.h>
#endif

using namespace cnn;

TEST_CASE("gpu: a CUDA graph replays its kernels with the inputs of the moment") {
  const Device gpu = Device::cuda(0);
  Tensor x = Tensor::from_vector<float>({-1, 0.25f, 1, 3}, {4}).to(gpu);
  Tensor total;
  CapturedGraph graph(gpu, [&] {
    NoGrad no_grad;
    total = sum(relu(sub(scale(x, 2.0), Tensor::ones({4}, DType::f32, gpu))));
  }, "a test stretch");
  graph.replay();
  CHECK(total.item() == 6.0);
  x.copy_(Tensor::from_vector<float>({2, 2, 0, 0}, {4}).to(gpu));
  graph.replay();
  CHECK(total.item() == 6.0);
  x.copy_(Tensor::from_vector<float>({5, 0, 0, 0}, {4}).to(gpu));
  graph.replay();
  CHECK(total.item() == 9.0);
  CHECK(graph.memory().reserved > 0);
  CHECK_THROWS_WITH_AS(CapturedGraph(gpu, [&] { (void)x.item(); }, "the test step"),
                       doctest::Contains("during the capture of the test step"), Error);
}

#if CNN_WITH_CUDA
TEST_CASE("gpu: a graph waits for its last replay before its memory goes, whatever stream is current then") {
  // Before, the destructor synchronised the stream current at its end, not the one the replay ran
  // on: a replay on a caller's stream, set back since, could still be writing the pool's memory.
  const Device gpu = Device::cuda(0);
  const Tensor x = Tensor::full({1 << 20}, 1.0, DType::f32, gpu);
  Tensor y;
  auto graph = std::make_unique<CapturedGraph>(gpu, [&] {
    NoGrad no_grad;
    y = scale(x, 3.0);
  }, "a test stretch");
  cudaStream_t mine = nullptr;
  REQUIRE(cudaStreamCreateWithFlags(&mine, cudaStreamNonBlocking) == cudaSuccess);
  std::atomic<bool> go{false};
  const auto hold = [](void* flag) {
    while (!static_cast<std::atomic<bool>*>(flag)->load()) {
    }
  };
  REQUIRE(cudaLaunchHostFunc(mine, hold, &go) == cudaSuccess);  // the replay queues behind this
  cuda::set_stream(0, mine);
  graph->replay();
  cuda::set_stream(0, nullptr);
  std::thread release([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    go = true;
  });
  graph.reset();
  const cudaError_t idle = cudaStreamQuery(mine);
  (void)cudaGetLastError();  // a not-ready answer would be left as the thread's error
  CHECK(idle == cudaSuccess);  // the replay had run when the graph was gone
  release.join();
  CHECK(cudaStreamSynchronize(mine) == cudaSuccess);
  CHECK(y.to_doubles()[12345] == 3.0);
  CHECK(cudaStreamDestroy(mine) == cudaSuccess);
}
#endif

TEST_CASE("gpu: increment_ and device-seeded dropout agree with the CPU") {
  const Device gpu = Device::cuda(0);
  const Tensor count = Tensor::from_vector<int64_t>({41}, {}).to(gpu);
  increment_(count);
  CHECK(count.item() == 42.0);
  const Tensor seed = Tensor::from_vector<int64_t>({987654321}, {});
  const Tensor x = Tensor::uniform({64, 9}, -1, 1, 2);
  for (bool per_row : {false, true}) {
    const auto masked = [&](const Tensor& input, const Tensor& seed_from) {
      return per_row ? drop_path(input, 0.3, 5, 11, seed_from) : dropout(input, 0.3, 5, 11, seed_from);
    };
    CHECK(masked(x.to(gpu), seed.to(gpu)).to_doubles() == masked(x, seed).to_doubles());
  }
}

TEST_CASE("gpu: training with cuda_graphs equals eager training bit for bit, in fp32, bf16 and fp16") {
  for (const char* precision : {"fp32", "bf16", "fp16"}) {
    CAPTURE(precision);
    cnn::train::testing::SmallRun run(std::string("graph_gpu_") + precision, 136, 64, 1, 2);
    const std::string log = cnn::train::testing::check_graphs_train_as_eager(
        run, {"train.device=cuda", "train.deterministic=true", std::string("precision.mode=") + precision,
              "optim.clip_grad_norm=1.0"});
    CHECK(log.find("captured the training step at step 4") != std::string::npos);
  }
}
