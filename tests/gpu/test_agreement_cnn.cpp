// CPU vs CUDA agreement (label gpu) for the CNN ops: conv2d through cuDNN in each variant and
// dtype, batch norm with each fused activation, pooling, dropout, drop-path, concat.
#include <doctest/doctest.h>

#include "agreement.h"

using namespace cnn;
using namespace cnn::testing;

TEST_CASE("gpu agreement: conv2d variants through cuDNN (f32, f16, bf16; heuristic and benchmark choice)") {
  struct Case {
    Shape x, w;
    Conv2dOptions o;
  };
  const Case cases[] = {{{8, 16, 16, 32}, {64, 3, 3, 32}, {1, 1, 1, 1, 1, 1, 1}},
                        {{8, 17, 15, 16}, {32, 3, 3, 16}, {2, 2, 1, 1, 1, 1, 1}},
                        {{4, 16, 16, 16}, {16, 3, 3, 16}, {1, 1, 2, 2, 2, 2, 1}},
                        {{4, 16, 16, 32}, {64, 3, 3, 8}, {1, 1, 1, 1, 1, 1, 4}},
                        {{4, 16, 16, 32}, {32, 3, 3, 1}, {1, 1, 1, 1, 1, 1, 32}},
                        {{4, 16, 16, 32}, {32, 5, 5, 1}, {2, 2, 2, 2, 1, 1, 32}},
                        {{8, 14, 14, 64}, {128, 1, 1, 64}, {}},
                        {{2, 32, 32, 3}, {16, 7, 7, 3}, {2, 2, 3, 3, 1, 1, 1}}};
  for (bool benchmark : {false, true}) {
    cuda::set_cudnn_benchmark(benchmark);
    for (const Case& c : cases) {
      const Conv2dOptions o = c.o;
      const auto f = [o](const std::vector<Tensor>& v) { return conv2d(v[0], v[1], v[2], o); };
      const std::vector<Tensor> in = {u(c.x, 1), u(c.w, 2, -0.2, 0.2), u({c.w[0]}, 3)};
      expect_agreement(f, in, 2e-3);  // TF32 may be used for f32 convolutions, as in PyTorch
      expect_agreement(f, in, 3e-2, DType::f16);
      expect_agreement(f, in, 6e-2, DType::bf16);
    }
  }
  cuda::set_cudnn_benchmark(false);
  expect_agreement([](const std::vector<Tensor>& v) { return conv2d(v[0], v[1], v[2], {1, 1, 1, 1, 1, 1, 1}); },
                   {u({2, 6, 6, 4}, 4), u({5, 3, 3, 4}, 5), u({5}, 6)}, 1e-9, DType::f64);
}

TEST_CASE("gpu: deterministic cuDNN algorithms give bitwise-equal convolution gradients run to run") {
  cuda::set_cudnn_deterministic(true);
  // Large reductions over the batch are where non-deterministic algorithms (atomics) get picked.
  const Tensor x = u({64, 28, 28, 64}, 7).to(Device::cuda()), w = u({64, 3, 3, 64}, 8, -0.1, 0.1).to(Device::cuda());
  const auto filter_gradient = [&] {
    const Tensor leaf = w.detach().requires_grad_();
    Tape tape;
    {
      Tape::Recording rec(tape);
      tape.backward(sum(conv2d(x, leaf, Tensor(), {1, 1, 1, 1, 1, 1, 1})));
    }
    return leaf.grad().to_doubles();
  };
  for (bool benchmark : {false, true}) {
    cuda::set_cudnn_benchmark(benchmark);
    const std::vector<double> first = filter_gradient();
    for (int run = 0; run < 3; ++run) CHECK(filter_gradient() == first);
  }
  cuda::set_cudnn_benchmark(false);
  cuda::set_cudnn_deterministic(false);
}

TEST_CASE("gpu agreement: batch_norm2d train and eval with each fused activation") {
  for (bool training : {true, false}) {
    for (BatchNormActivation act : {BatchNormActivation::none, BatchNormActivation::relu, BatchNormActivation::add_relu}) {
      for (DType dt : {DType::f32, DType::f16, DType::bf16}) {
        const double tol = dt == DType::f32 ? 1e-4 : (dt == DType::f16 ? 1e-2 : 5e-2);
        // Running statistics live on each backend; both start from the same values.
        const Tensor rm = u({48}, 10, -0.5, 0.5), rv = u({48}, 11, 0.5, 2.0);
        const Tensor rm_gpu = rm.clone().to(Device::cuda()), rv_gpu = rv.clone().to(Device::cuda());
        const Tensor rm_cpu = rm.clone(), rv_cpu = rv.clone();
        expect_agreement(
            [&](const std::vector<Tensor>& v) {
              const bool gpu = v[0].is_cuda();
              return batch_norm2d(v[0], v[1].to(DType::f32), v[2].to(DType::f32), gpu ? rm_gpu : rm_cpu,
                                  gpu ? rv_gpu : rv_cpu, training, 0.1, 1e-5, act,
                                  act == BatchNormActivation::add_relu ? v[3] : Tensor());
            },
            {u({16, 12, 12, 48}, 12), u({48}, 13, 0.5, 1.5), u({48}, 14), u({16, 12, 12, 48}, 15)}, tol, dt);
        CHECK(max_rel_diff(rm_gpu, rm_cpu) < 1e-4);
        CHECK(max_rel_diff(rv_gpu, rv_cpu) < 1e-4);
      }
    }
  }
}

TEST_CASE("gpu agreement: pooling, dropout, drop_path, transpose, concat") {
  Pool2dOptions o;
  o.kernel_h = o.kernel_w = 3;
  o.stride_h = o.stride_w = 2;
  o.pad_h = o.pad_w = 1;
  const Tensor x = u({8, 33, 31, 24}, 20);
  expect_agreement([o](const std::vector<Tensor>& v) { return max_pool2d(v[0], o); }, {x}, 0);
  expect_agreement([o](const std::vector<Tensor>& v) { return avg_pool2d(v[0], o); }, {x}, 1e-5);
  expect_agreement([](const std::vector<Tensor>& v) { return adaptive_avg_pool2d(v[0], 7, 7); }, {x}, 1e-5);
  expect_agreement([](const std::vector<Tensor>& v) { return global_avg_pool2d(v[0]); }, {x}, 1e-5);
  expect_agreement([](const std::vector<Tensor>& v) { return dropout(v[0], 0.2, 9, 123); }, {x}, 0);
  expect_agreement([](const std::vector<Tensor>& v) { return drop_path(v[0], 0.2, 9, 0); }, {x}, 0);
  expect_agreement([](const std::vector<Tensor>& v) { return transpose_last2(v[0].reshape({8, 33 * 31, 24})); }, {x}, 0);
  expect_agreement([](const std::vector<Tensor>& v) { return concat_channels({v[0], v[1]}); },
                   {x, u({8, 33, 31, 8}, 21)}, 0);
}
