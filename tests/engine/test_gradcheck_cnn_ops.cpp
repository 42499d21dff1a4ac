// Finite-difference gradient checks of the CNN ops: conv2d in its variants (stride, padding,
// dilation, groups, depthwise), batch_norm2d in train and eval mode with each fused activation,
// the pools, dropout, drop_path and concat_channels.
#include <doctest/doctest.h>

#include "engine/cnn.h"
#include "gradcheck.h"
#include "kernels/conv.h"

using namespace cnn;
using namespace cnn::testing;

namespace {
void expect_gradients(const GradFn& f, std::vector<Tensor> inputs) {
  const GradCheckResult r = gradcheck(f, std::move(inputs));
  INFO(r.report);
  CHECK(r.ok);
}

struct ConvCase {
  const char* name;
  Shape x, w;
  Conv2dOptions o;
  bool bias;
};
}  // namespace

TEST_CASE("gradcheck conv2d: stride, padding, dilation, groups, depthwise") {
  const ConvCase cases[] = {
      {"3x3 pad 1 with bias", {2, 5, 5, 3}, {4, 3, 3, 3}, {1, 1, 1, 1, 1, 1, 1}, true},
      {"3x3 stride 2 no pad", {1, 7, 6, 2}, {3, 3, 3, 2}, {2, 2, 0, 0, 1, 1, 1}, false},
      {"dilation 2", {1, 7, 7, 2}, {2, 3, 3, 2}, {1, 1, 2, 2, 2, 2, 1}, true},
      {"asymmetric 3x1 kernel, stride 2x1", {2, 6, 5, 2}, {3, 3, 1, 2}, {2, 1, 1, 0, 1, 1, 1}, false},
      {"2 groups", {1, 5, 5, 4}, {6, 3, 3, 2}, {1, 1, 1, 1, 1, 1, 2}, true},
      {"depthwise", {2, 5, 5, 3}, {3, 3, 3, 1}, {1, 1, 1, 1, 1, 1, 3}, true},
      {"depthwise stride 2, multiplier 2", {1, 6, 6, 2}, {4, 3, 3, 1}, {2, 2, 1, 1, 1, 1, 2}, false},
      {"1x1", {2, 3, 3, 4}, {5, 1, 1, 4}, {}, true},
      {"1x1 two groups", {2, 3, 3, 4}, {6, 1, 1, 2}, {1, 1, 0, 0, 1, 1, 2}, false},
      {"1x1 stride 2", {1, 5, 5, 3}, {2, 1, 1, 3}, {2, 2, 0, 0, 1, 1, 1}, true},
  };
  uint64_t seed = 200;
  for (const ConvCase& c : cases) {
    INFO(c.name);
    std::vector<Tensor> inputs = {uniform64(c.x, seed++), uniform64(c.w, seed++)};
    if (c.bias) inputs.push_back(uniform64({c.w[0]}, seed++));
    const Conv2dOptions o = c.o;
    expect_gradients([o](const std::vector<Tensor>& in) { return conv2d(in[0], in[1], in.size() > 2 ? in[2] : Tensor(), o); },
                     inputs);
  }
}

TEST_CASE("gradcheck conv2d when the batch is split into several im2col chunks") {
  // A budget of one sample's columns: each sample becomes its own GEMM (and 3 samples, 3 chunks).
  const int64_t previous = kernels::cpu::set_im2col_budget_bytes(5 * 5 * 3 * 3 * 3 * 8);
  expect_gradients([](const std::vector<Tensor>& in) { return conv2d(in[0], in[1], in[2], {1, 1, 1, 1, 1, 1, 1}); },
                   {uniform64({3, 5, 5, 3}, 250), uniform64({4, 3, 3, 3}, 251), uniform64({4}, 252)});
  kernels::cpu::set_im2col_budget_bytes(previous);
}

TEST_CASE("gradcheck batch_norm2d: train and eval, none / relu / add_relu") {
  const Tensor rm = uniform64({3}, 300, -0.5, 0.5), rv = uniform64({3}, 301, 0.5, 2.0);
  for (bool training : {true, false}) {
    for (BatchNormActivation act : {BatchNormActivation::none, BatchNormActivation::relu, BatchNormActivation::add_relu}) {
      INFO("training " << training << " activation " << static_cast<int>(act));
      std::vector<Tensor> inputs = {uniform64({2, 3, 2, 3}, 302, -2, 2), uniform64({3}, 303, 0.5, 1.5),
                                    uniform64({3}, 304)};
      if (act == BatchNormActivation::add_relu) inputs.push_back(uniform64({2, 3, 2, 3}, 305));
      expect_gradients(
          [&](const std::vector<Tensor>& in) {
            // Training runs without running statistics here, so the checker's repeated forward
            // passes leave nothing behind.
            return batch_norm2d(in[0], in[1], in[2], training ? Tensor() : rm, training ? Tensor() : rv, training, 0.1,
                                1e-5, act, in.size() > 3 ? in[3] : Tensor());
          },
          inputs);
    }
  }
}

TEST_CASE("gradcheck max_pool2d and avg_pool2d with padding and ceil mode") {
  Pool2dOptions o;
  o.kernel_h = o.kernel_w = 3;
  o.stride_h = o.stride_w = 2;
  o.pad_h = o.pad_w = 1;
  for (bool ceil_mode : {false, true}) {
    o.ceil_mode = ceil_mode;
    INFO("ceil_mode " << ceil_mode);
    expect_gradients([o](const std::vector<Tensor>& in) { return max_pool2d(in[0], o); }, {uniform64({2, 6, 7, 3}, 310)});
    for (bool include : {true, false}) {
      Pool2dOptions a = o;
      a.count_include_pad = include;
      expect_gradients([a](const std::vector<Tensor>& in) { return avg_pool2d(in[0], a); }, {uniform64({2, 6, 7, 3}, 311)});
    }
  }
}

TEST_CASE("gradcheck adaptive and global average pooling") {
  expect_gradients([](const std::vector<Tensor>& in) { return adaptive_avg_pool2d(in[0], 3, 2); }, {uniform64({2, 7, 5, 3}, 320)});
  expect_gradients([](const std::vector<Tensor>& in) { return global_avg_pool2d(in[0]); }, {uniform64({2, 4, 3, 5}, 321)});
}

TEST_CASE("gradcheck transpose_last2") {
  expect_gradients([](const std::vector<Tensor>& in) { return transpose_last2(in[0]); }, {uniform64({2, 3, 5}, 340)});
}

TEST_CASE("gradcheck dropout, drop_path and concat_channels") {
  expect_gradients([](const std::vector<Tensor>& in) { return dropout(in[0], 0.3, 7, 100); }, {uniform64({4, 6}, 330)});
  expect_gradients([](const std::vector<Tensor>& in) { return drop_path(in[0], 0.4, 7, 0); }, {uniform64({6, 2, 2, 3}, 331)});
  expect_gradients([](const std::vector<Tensor>& in) { return concat_channels({in[0], in[1], in[2]}); },
                   {uniform64({2, 3, 3, 2}, 332), uniform64({2, 3, 3, 4}, 333), uniform64({2, 3, 3, 1}, 334)});
}
