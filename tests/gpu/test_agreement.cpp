// CPU vs CUDA agreement (label gpu): every op's forward output and input gradients on the CUDA
// backend match the CPU backend on the same inputs; plus the CUDA runtime pieces (allocator reuse,
// caller streams, from_blob on device memory, Philox draws).
#include <doctest/doctest.h>

#include <cmath>
#include <functional>

#include "engine/cnn.h"
#include "agreement.h"

#if CNN_WITH_CUDA
#include <cuda_runtime.h>
#endif

using namespace cnn;
using namespace cnn::testing;


TEST_CASE("gpu agreement: unary ops in f32, f16 and bf16") {
  const std::vector<std::pair<const char*, OpFn>> ops = {
      {"relu", [](const std::vector<Tensor>& x) { return relu(x[0]); }},
      {"silu", [](const std::vector<Tensor>& x) { return silu(x[0]); }},
      {"sigmoid", [](const std::vector<Tensor>& x) { return sigmoid(x[0]); }},
      {"tanh", [](const std::vector<Tensor>& x) { return tanh(x[0]); }},
      {"gelu", [](const std::vector<Tensor>& x) { return gelu(x[0]); }},
      {"gelu_tanh", [](const std::vector<Tensor>& x) { return gelu(x[0], GeluApproximation::tanh); }},
      {"exp", [](const std::vector<Tensor>& x) { return exp(x[0]); }},
      {"log", [](const std::vector<Tensor>& x) { return log(abs(x[0]) + 0.5); }},
      {"neg", [](const std::vector<Tensor>& x) { return neg(x[0]); }},
      {"abs", [](const std::vector<Tensor>& x) { return abs(x[0]); }},
      {"sqrt", [](const std::vector<Tensor>& x) { return sqrt(abs(x[0]) + 0.5); }},
      {"pow", [](const std::vector<Tensor>& x) { return pow(abs(x[0]) + 0.5, 2.5); }},
      {"affine", [](const std::vector<Tensor>& x) { return affine(x[0], 3.0, -1.0); }},
  };
  for (const auto& [name, f] : ops) {
    INFO(name);
    expect_agreement(f, {u({1000, 33}, 1)}, 1e-5);
    expect_agreement(f, {u({1000, 33}, 1)}, 1e-2, DType::f16);
    expect_agreement(f, {u({1000, 33}, 1)}, 2e-2, DType::bf16);
  }
}

TEST_CASE("gpu agreement: binary ops and every broadcast pattern") {
  const std::pair<Shape, Shape> patterns[] = {
      {{4, 8, 8, 16}, {4, 8, 8, 16}}, {{4, 8, 8, 16}, {1}}, {{4, 8, 8, 16}, {16}}, {{4, 8, 8, 16}, {4, 1, 1, 16}},
      {{16}, {4, 8, 8, 16}}};
  for (auto op : {add, sub, mul, div}) {
    for (const auto& [sa, sb] : patterns) {
      expect_agreement([op](const std::vector<Tensor>& x) { return op(x[0], x[1]); }, {u(sa, 2), u(sb, 3, 0.5, 2)},
                       1e-5);
    }
  }
}

TEST_CASE("gpu agreement: reductions") {
  const Tensor x = u({8, 16, 16, 32}, 4);
  expect_agreement([](const std::vector<Tensor>& v) { return sum(v[0]); }, {x}, 1e-5);
  expect_agreement([](const std::vector<Tensor>& v) { return mean(v[0], {1, 2}); }, {x}, 1e-5);
  expect_agreement([](const std::vector<Tensor>& v) { return sum(v[0], {0, 2}, true); }, {x}, 1e-5);
  expect_agreement([](const std::vector<Tensor>& v) { return mean(v[0], {3}); }, {x}, 1e-5);
  expect_agreement([](const std::vector<Tensor>& v) { return max_last(v[0]).first; }, {u({64, 1000}, 5)}, 0);
}

TEST_CASE("gpu agreement: matmul and linear (cuBLAS), f32 and f16/bf16 tensor-op math") {
  expect_agreement([](const std::vector<Tensor>& v) { return matmul(v[0], v[1]); }, {u({64, 96}, 6), u({96, 48}, 7)},
                   1e-4);
  for (DType dt : {DType::f32, DType::f16, DType::bf16}) {
    const double tol = dt == DType::f32 ? 1e-4 : 3e-2;
    expect_agreement([](const std::vector<Tensor>& v) { return linear(v[0], v[1], v[2]); },
                     {u({32, 128}, 8), u({64, 128}, 9, -0.1, 0.1), u({64}, 10)}, tol, dt);
  }
  expect_agreement([](const std::vector<Tensor>& v) { return linear(v[0], v[1]); }, {u({16, 8}, 8), u({4, 8}, 9)}, 1e-5,
                   DType::f64);
}

TEST_CASE("gpu agreement: softmax, log_softmax and cross-entropy") {
  expect_agreement([](const std::vector<Tensor>& v) { return softmax(v[0]); }, {u({64, 1000}, 11, -8, 8)}, 1e-5);
  expect_agreement([](const std::vector<Tensor>& v) { return log_softmax(v[0]); }, {u({64, 1000}, 12, -8, 8)}, 1e-5);
  const Tensor labels = Tensor::uniform({64}, 0, 1000, 13).to(DType::i64);
  const Tensor labels_gpu = labels.to(Device::cuda());
  expect_agreement(
      [&](const std::vector<Tensor>& v) { return cross_entropy(v[0], v[0].is_cuda() ? labels_gpu : labels, 0.1); },
      {u({64, 1000}, 14, -8, 8)}, 1e-5);
  expect_agreement(
      [&](const std::vector<Tensor>& v) { return cross_entropy(v[0], v[0].is_cuda() ? labels_gpu : labels); },
      {u({64, 1000}, 14, -8, 8)}, 1e-2, DType::f16);
  const Tensor soft = softmax(u({64, 1000}, 15));
  const Tensor soft_gpu = soft.to(Device::cuda());
  expect_agreement([&](const std::vector<Tensor>& v) { return cross_entropy_soft(v[0], v[0].is_cuda() ? soft_gpu : soft); },
                   {u({64, 1000}, 16, -8, 8)}, 1e-5);
}

TEST_CASE("gpu agreement: cast between floating types") {
  expect_agreement([](const std::vector<Tensor>& v) { return cast(cast(v[0], DType::f16), DType::f32); },
                   {u({4096}, 17)}, 0);
  expect_agreement([](const std::vector<Tensor>& v) { return cast(cast(v[0], DType::bf16), DType::f32); },
                   {u({4096}, 18)}, 0);
}

TEST_CASE("gpu: random tensors draw the same values as on the CPU") {
  const Tensor a = Tensor::uniform({100000}, -1, 1, 99), b = Tensor::uniform({100000}, -1, 1, 99, DType::f32, Device::cuda());
  CHECK(max_rel_diff(b, a) == 0);
  const Tensor n = Tensor::randn({100000}, 5), m = Tensor::randn({100000}, 5, DType::f32, Device::cuda());
  CHECK(max_rel_diff(m, n) < 1e-6);
}

TEST_CASE("gpu: the caching allocator stops calling cudaMalloc in a steady loop") {
  Allocator& alloc = cuda_allocator(0);
  const Tensor w = u({256, 256}, 20).to(Device::cuda()).requires_grad_();
  auto step = [&] {
    Tape tape;
    Tensor loss;
    {
      Tape::Recording rec(tape);
      loss = mean(tanh(linear(u({128, 256}, 21).to(Device::cuda()), w)));
    }
    tape.backward(loss);
    w.zero_grad();
  };
  step();
  step();
  const uint64_t before = alloc.stats().system_allocations;
  for (int i = 0; i < 10; ++i) step();
  CHECK(alloc.stats().system_allocations == before);
  CHECK(alloc.stats().peak_in_use > 0);
  alloc.empty_cache();
  CHECK(alloc.stats().reserved == alloc.stats().in_use);
}

TEST_CASE("gpu: from_blob wraps device memory; work runs on a caller's stream") {
  Tensor owner = Tensor::zeros({1000}, DType::f32, Device::cuda());
  Tensor view = Tensor::from_blob(owner.data(), {1000}, DType::f32, Device::cuda());
  view.fill_(3.0);
  CHECK(owner.to_doubles()[999] == 3.0);
#if CNN_WITH_CUDA
  cudaStream_t mine = nullptr;
  REQUIRE(cudaStreamCreateWithFlags(&mine, cudaStreamNonBlocking) == cudaSuccess);
  cuda::set_stream(0, mine);
  CHECK(cuda::current_stream(0) == static_cast<void*>(mine));
  const Tensor x = u({1 << 20}, 30).to(Device::cuda());
  const Tensor y = relu(x);
  REQUIRE(cudaStreamSynchronize(mine) == cudaSuccess);
  cuda::set_stream(0, nullptr);
  CHECK(max_rel_diff(y, relu(u({1 << 20}, 30))) == 0);
  cudaStreamDestroy(mine);
#endif
}
