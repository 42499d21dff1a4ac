// The op case table (see op_cases.h). Groups follow engine/ops.h. Defaults: the case runs in the
// gradient check with GradCheckOptions{} and in the agreement at f32 with tolerance 1e-5.
#include "op_cases.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <deque>
#include <map>

#include "kernels/conv.h"
#include "op_list.h"

namespace cnn::testing {

namespace {
using In = const std::vector<Tensor>&;

// (Functions, not namespace-scope objects: the table is built during static initialisation, when
// the tests register themselves.)
std::vector<Tolerance> elementwise() { return {{DType::f32, 1e-5}, {DType::f16, 1e-2}, {DType::bf16, 2e-2}}; }

OpCase& add(std::vector<OpCase>& cases, std::string name, std::string op, OpFn f, std::vector<Input> inputs,
            std::vector<Tolerance> agreement = {{DType::f32, 1e-5}}) {
  OpCase& c = cases.emplace_back();
  c.name = std::move(name);
  c.op = std::move(op);
  c.f = std::move(f);
  c.inputs = std::move(inputs);
  c.agreement = std::move(agreement);
  return c;
}

Input tensor(Shape shape, Shape large = {}, double low = -1.0, double high = 1.0) {
  Input in;
  in.shape = std::move(shape);
  in.large = std::move(large);
  in.low = low;
  in.high = high;
  return in;
}
// A fixed input in the accumulate dtype: BatchNorm's running statistics.
Input statistics(Shape shape, Shape large, double low, double high) {
  Input in = tensor(std::move(shape), std::move(large), low, high);
  in.differentiable = false;
  in.accumulate = true;
  return in;
}
Input unary_input(UnaryDomain domain) {
  const auto [low, high] = unary_test_range(domain);
  Input in = tensor({3, 5}, {1000, 33}, low, high);
  if (domain == UnaryDomain::kink_at_zero) in.values = Values::away_from_zero;
  return in;
}

void unary_ops(std::vector<OpCase>& cases) {
#define CNN_UNARY_CASE(op, domain) \
  add(cases, #op, #op, [](In v) { return cnn::op(v[0]); }, {unary_input(UnaryDomain::domain)}, elementwise());
  CNN_UNARY_OPS(CNN_UNARY_CASE)
#undef CNN_UNARY_CASE
  const auto input = [](UnaryOp op) { return std::vector<Input>{unary_input(unary_domain(op))}; };
  add(cases, "gelu", "gelu", [](In v) { return gelu(v[0]); }, input(UnaryOp::gelu_erf), elementwise());
  add(cases, "gelu tanh approximation", "gelu", [](In v) { return gelu(v[0], GeluApproximation::tanh); },
      input(UnaryOp::gelu_tanh), elementwise());
  add(cases, "pow 2.5", "pow", [](In v) { return pow(v[0], 2.5); }, input(UnaryOp::pow), elementwise());
  add(cases, "pow 3 of negative bases too", "pow", [](In v) { return pow(v[0], 3.0); },
      {tensor({3, 5}, {1000, 33}, -2, 2)}, elementwise());
  add(cases, "affine", "affine", [](In v) { return affine(v[0], -1.5, 0.25); }, input(UnaryOp::affine), elementwise());
  add(cases, "scale", "scale", [](In v) { return scale(v[0], 3.0); }, input(UnaryOp::affine), elementwise());
  add(cases, "shift", "shift", [](In v) { return shift(v[0], 2.0); }, input(UnaryOp::affine), elementwise());
}

void binary_ops(std::vector<OpCase>& cases) {
  struct Pattern {
    const char* name;
    Shape a, b, large_a, large_b;
  };
  const Pattern patterns[] = {
      {"same shape", {2, 3, 4}, {2, 3, 4}, {4, 8, 8, 16}, {4, 8, 8, 16}},
      {"scalar right", {2, 3, 4}, {1}, {4, 8, 8, 16}, {1}},
      {"scalar left", {}, {2, 3}, {}, {4, 8, 8, 16}},
      {"[C] against [N,H,W,C]", {2, 3, 2, 4}, {4}, {4, 8, 8, 16}, {16}},
      {"[N,H,W,C] against [C]", {4}, {2, 2, 3, 4}, {16}, {4, 8, 8, 16}},
      {"[N,1,1,C] against [N,H,W,C]", {2, 3, 3, 4}, {2, 1, 1, 4}, {4, 8, 8, 16}, {4, 1, 1, 16}},
      {"[N,H,W,C] against [N,1,1,C]", {2, 1, 1, 4}, {2, 2, 3, 4}, {4, 1, 1, 16}, {4, 8, 8, 16}},
  };
  struct Op {
    const char* name;
    Tensor (*f)(const Tensor&, const Tensor&);
    double b_low;  // div: b stays away from zero
  };
  for (const Op& op : {Op{"add", cnn::add, -1.0}, Op{"sub", sub, -1.0}, Op{"mul", mul, -1.0}, Op{"div", div, 0.5}}) {
    for (const Pattern& p : patterns) {
      const auto f = op.f;
      add(cases, std::string(op.name) + " " + p.name, op.name, [f](In v) { return f(v[0], v[1]); },
          {tensor(p.a, p.large_a), tensor(p.b, p.large_b, op.b_low, 2.0)});
    }
  }
}

void reductions(std::vector<OpCase>& cases) {
  const Shape small{2, 3, 4, 5}, large{8, 16, 16, 32};
  add(cases, "sum of all elements", "sum", [](In v) { return sum(v[0]); }, {tensor({3, 4}, large)});
  add(cases, "mean of all elements", "mean", [](In v) { return mean(v[0]); }, {tensor({3, 4}, large)});
  for (const std::vector<int>& axes : std::vector<std::vector<int>>{{0}, {3}, {1, 2}, {0, 2}, {-1, 1}, {0, 1, 2, 3}}) {
    std::string list;
    for (int a : axes) {
      if (!list.empty()) list += ' ';
      list += std::to_string(a);
    }
    for (bool keepdim : {false, true}) {
      const std::string how = " over axes " + list + (keepdim ? " keepdim" : "");
      add(cases, "sum" + how, "sum", [axes, keepdim](In v) { return sum(v[0], axes, keepdim); },
          {tensor(small, large)});
      add(cases, "mean" + how, "mean", [axes, keepdim](In v) { return mean(v[0], axes, keepdim); },
          {tensor(small, large)});
    }
  }
  // Ties have no gradient: uniform draws are distinct. The maximum is exact on both backends.
  add(cases, "max_last", "max_last", [](In v) { return max_last(v[0]).first; }, {tensor({4, 7}, {64, 1000}, -2, 2)},
      {{DType::f32, 0.0}});
}

void matrix_products(std::vector<OpCase>& cases) {
  add(cases, "matmul", "matmul", [](In v) { return matmul(v[0], v[1]); },
      {tensor({3, 4}, {64, 96}, -2, 2), tensor({4, 5}, {96, 48}, -2, 2)}, {{DType::f32, 1e-4}});
  // f16/bf16 with f32 accumulation (tensor-op math on the GPU).
  add(cases, "linear with bias", "linear", [](In v) { return linear(v[0], v[1], v[2]); },
      {tensor({2, 3, 4}, {32, 128}, -2, 2), tensor({5, 4}, {64, 128}, -0.1, 0.1), tensor({5}, {64}, -2, 2)},
      {{DType::f32, 1e-4}, {DType::f16, 3e-2}, {DType::bf16, 3e-2}});
  add(cases, "linear without bias", "linear", [](In v) { return linear(v[0], v[1]); },
      {tensor({3, 4}, {16, 8}, -2, 2), tensor({2, 4}, {4, 8}, -2, 2)}, {{DType::f32, 1e-4}, {DType::f64, 1e-5}});
}

void softmax_family(std::vector<OpCase>& cases) {
  const Input logits = tensor({4, 6}, {64, 1000}, -8, 8);
  add(cases, "softmax", "softmax", [](In v) { return softmax(v[0]); }, {logits});
  add(cases, "log_softmax", "log_softmax", [](In v) { return log_softmax(v[0]); }, {logits});
  Input labels = tensor({4}, {64});
  labels.values = Values::labels;
  labels.differentiable = false;
  add(cases, "cross_entropy", "cross_entropy", [](In v) { return cross_entropy(v[0], v[1]); }, {logits, labels},
      {{DType::f32, 1e-5}, {DType::f16, 1e-2}});
  add(cases, "cross_entropy label smoothing 0.1", "cross_entropy", [](In v) { return cross_entropy(v[0], v[1], 0.1); },
      {logits, labels});
  Input targets = tensor({4, 6}, {64, 1000}, -2, 2);
  targets.values = Values::distribution;
  targets.differentiable = false;
  targets.accumulate = true;
  add(cases, "cross_entropy_soft", "cross_entropy_soft", [](In v) { return cross_entropy_soft(v[0], v[1]); },
      {logits, targets});
}

void casts(std::vector<OpCase>& cases) {
  // Rounding limits how well central differences resolve the (unit) derivative; it is constant, so
  // a wide step loses nothing. Casts are exact on both backends (the same rounding code).
  GradCheckOptions rounding;
  rounding.eps = 0.1;
  rounding.rtol = 1e-2;
  rounding.atol = 1e-2;
  GradCheckOptions bf16_rounding = rounding;
  bf16_rounding.atol = 5e-2;  // 8 significant bits
  add(cases, "cast to f32 and back", "cast", [](In v) { return cast(cast(v[0], DType::f32), v[0].dtype()); },
      {tensor({5}, {4096}, -2, 2)}, {{DType::f64, 0.0}})
      .gradcheck_options = rounding;
  add(cases, "cast to f16 and back", "cast", [](In v) { return cast(cast(v[0], DType::f16), v[0].dtype()); },
      {tensor({5}, {4096}, -2, 2)}, {{DType::f32, 0.0}})
      .gradcheck_options = rounding;
  add(cases, "cast to bf16 and back", "cast", [](In v) { return cast(cast(v[0], DType::bf16), v[0].dtype()); },
      {tensor({5}, {4096}, -2, 2)}, {{DType::f32, 0.0}})
      .gradcheck_options = bf16_rounding;
  add(cases, "scale in f16", "scale", [](In v) { return cast(scale(cast(v[0], DType::f16), 2.0), v[0].dtype()); },
      {tensor({5}, {4096}, -2, 2)}, {{DType::f32, 0.0}})
      .gradcheck_options = rounding;
}

void views(std::vector<OpCase>& cases) {
  add(cases, "reshape", "reshape",
      [](In v) {
        return tanh(v[0].reshape({v[0].size(1), v[0].size(0)}));
      },
      {tensor({2, 6}, {1000, 33})});
  add(cases, "slice", "slice", [](In v) { return tanh(v[0].slice(1, 3)); }, {tensor({4, 3}, {1000, 33})});
}

void convolutions(std::vector<OpCase>& cases) {
  struct Conv {
    const char* name;
    Shape x, w, large_x, large_w;
    Conv2dOptions o;
    bool bias;
    bool depthwise;  // groups = the input's channels
  };
  // Each: name; x and w in the gradient check; x and w in the agreement; options; bias; depthwise.
  const Conv convs[] = {
      {"3x3 pad 1 with bias", {2, 5, 5, 3}, {4, 3, 3, 3},
       {8, 16, 16, 32}, {64, 3, 3, 32}, {1, 1, 1, 1, 1, 1, 1}, true, false},
      {"3x3 stride 2", {1, 7, 6, 2}, {3, 3, 3, 2},
       {8, 17, 15, 16}, {32, 3, 3, 16}, {2, 2, 0, 0, 1, 1, 1}, false, false},
      {"3x3 stride 2 pad 1 with bias", {1, 7, 6, 2}, {3, 3, 3, 2},
       {8, 17, 15, 16}, {32, 3, 3, 16}, {2, 2, 1, 1, 1, 1, 1}, true, false},
      {"dilation 2", {1, 7, 7, 2}, {2, 3, 3, 2},
       {4, 16, 16, 16}, {16, 3, 3, 16}, {1, 1, 2, 2, 2, 2, 1}, true, false},
      {"asymmetric 3x1 kernel, stride 2x1", {2, 6, 5, 2}, {3, 3, 1, 2},
       {4, 16, 15, 16}, {32, 3, 1, 16}, {2, 1, 1, 0, 1, 1, 1}, false, false},
      {"2 groups", {1, 5, 5, 4}, {6, 3, 3, 2},
       {4, 16, 16, 32}, {64, 3, 3, 16}, {1, 1, 1, 1, 1, 1, 2}, true, false},
      {"4 groups", {1, 5, 5, 8}, {4, 3, 3, 2},
       {4, 16, 16, 32}, {64, 3, 3, 8}, {1, 1, 1, 1, 1, 1, 4}, true, false},
      {"depthwise", {2, 5, 5, 3}, {3, 3, 3, 1},
       {4, 16, 16, 32}, {32, 3, 3, 1}, {1, 1, 1, 1, 1, 1, 1}, true, true},
      {"depthwise stride 2, multiplier 2", {1, 6, 6, 2}, {4, 3, 3, 1},
       {4, 16, 16, 16}, {32, 3, 3, 1}, {2, 2, 1, 1, 1, 1, 1}, false, true},
      {"depthwise 5x5 stride 2 pad 2", {1, 7, 7, 2}, {2, 5, 5, 1},
       {4, 16, 16, 32}, {32, 5, 5, 1}, {2, 2, 2, 2, 1, 1, 1}, true, true},
      {"1x1", {2, 3, 3, 4}, {5, 1, 1, 4},
       {8, 14, 14, 64}, {128, 1, 1, 64}, {}, true, false},
      {"1x1 two groups", {2, 3, 3, 4}, {6, 1, 1, 2},
       {8, 14, 14, 64}, {128, 1, 1, 32}, {1, 1, 0, 0, 1, 1, 2}, false, false},
      {"1x1 stride 2", {1, 5, 5, 3}, {2, 1, 1, 3},
       {8, 15, 15, 32}, {64, 1, 1, 32}, {2, 2, 0, 0, 1, 1, 1}, true, false},
      {"7x7 stride 2 pad 3 (a stem)", {1, 8, 8, 3}, {2, 7, 7, 3},
       {2, 32, 32, 3}, {16, 7, 7, 3}, {2, 2, 3, 3, 1, 1, 1}, true, false},
  };
  // TF32 may be used for f32 convolutions on the GPU, as in PyTorch.
  const std::vector<Tolerance> tolerances = {{DType::f32, 2e-3}, {DType::f16, 3e-2}, {DType::bf16, 6e-2}};
  for (const Conv& c : convs) {
    const Conv2dOptions options = c.o;
    const bool depthwise = c.depthwise;
    const OpFn f = [options, depthwise](In v) {
      Conv2dOptions o = options;
      if (depthwise) o.groups = static_cast<int>(v[0].size(3));
      return conv2d(v[0], v[1], v.size() > 2 ? v[2] : Tensor(), o);
    };
    std::vector<Input> inputs = {tensor(c.x, c.large_x, -2, 2), tensor(c.w, c.large_w, -0.2, 0.2)};
    if (c.bias) inputs.push_back(tensor({c.w[0]}, {c.large_w[0]}, -2, 2));
    std::vector<Tolerance> agreement = tolerances;
    if (&c == &convs[0]) agreement.push_back({DType::f64, 1e-9});
    add(cases, std::string("conv2d ") + c.name, "conv2d", f, inputs, agreement);
    // cuDNN's measured algorithm choice has no CPU counterpart: agreement only.
    OpCase& measured =
        add(cases, std::string("conv2d ") + c.name + " (cuDNN benchmark)", "conv2d", f, inputs, tolerances);
    measured.gradcheck = false;
    measured.setting = [] {
      cuda::set_cudnn_benchmark(true);
      return std::function<void()>([] { cuda::set_cudnn_benchmark(false); });
    };
  }
  // A budget of one f64 sample's columns: each sample becomes its own GEMM (3 samples, 3 chunks).
  OpCase& chunked = add(cases, "conv2d split into im2col chunks", "conv2d",
                        [](In v) { return conv2d(v[0], v[1], v[2], {1, 1, 1, 1, 1, 1, 1}); },
                        {tensor({3, 5, 5, 3}, {}, -2, 2), tensor({4, 3, 3, 3}, {}, -0.2, 0.2), tensor({4}, {}, -2, 2)},
                        {{DType::f32, 2e-3}});
  chunked.setting = [] {
    const int64_t previous = kernels::cpu::set_im2col_budget_bytes(5 * 5 * 3 * 3 * 3 * 8);
    return std::function<void()>([previous] { kernels::cpu::set_im2col_budget_bytes(previous); });
  };
}

void batch_norms(std::vector<OpCase>& cases) {
  const Shape x{2, 3, 2, 3}, large_x{16, 12, 12, 48};
  const Shape c{3}, large_c{48};
  const std::vector<Tolerance> tolerances = {{DType::f32, 1e-4}, {DType::f16, 1e-2}, {DType::bf16, 5e-2}};
  Input weight = tensor(c, large_c, 0.5, 1.5), bias = tensor(c, large_c);
  weight.accumulate = bias.accumulate = true;
  // Running statistics are inputs held fixed: the gradient check's repeated forward passes update
  // them in training (which does not change the output), and the agreement test compares their
  // updated values on the two backends.
  const Input running_mean = statistics(c, large_c, -0.5, 0.5), running_var = statistics(c, large_c, 0.5, 2.0);
  const struct {
    const char* name;
    BatchNormActivation act;
  } activations[] = {{"", BatchNormActivation::none},
                     {" relu", BatchNormActivation::relu},
                     {" add_relu", BatchNormActivation::add_relu}};
  for (bool training : {true, false}) {
    for (const auto& a : activations) {
      const BatchNormActivation act = a.act;
      std::vector<Input> inputs = {tensor(x, large_x, -2, 2), weight, bias, running_mean, running_var};
      if (act == BatchNormActivation::add_relu) inputs.push_back(tensor(x, large_x));
      add(cases, std::string("batch_norm2d ") + (training ? "train" : "eval") + a.name, "batch_norm2d",
          [training, act](In v) {
            return batch_norm2d(v[0], v[1], v[2], v[3], v[4], training, 0.1, 1e-5, act, v.size() > 5 ? v[5] : Tensor());
          },
          inputs, tolerances);
    }
  }
  add(cases, "batch_norm2d train without running statistics", "batch_norm2d",
      [](In v) { return batch_norm2d(v[0], v[1], v[2], Tensor(), Tensor(), true); },
      {tensor(x, large_x, -2, 2), weight, bias}, tolerances);

  // BatchNorm + ReLU + max-pool: windows that tile, leave a column uncovered, overlap, or clip in
  // ceil mode. (Its CPU kernels' bits are checked against the three ops in
  // tests/engine/test_batch_norm_pool.cpp.)
  const Shape pooled_x{2, 6, 7, 3}, large_pooled_x{16, 12, 13, 48};
  struct Window {
    const char* name;
    int kernel, stride, pad;
    bool ceil_mode;
  };
  for (bool training : {true, false}) {
    for (const Window& w : {Window{"2x2", 2, 2, 0, false}, Window{"3x3 stride 2 pad 1", 3, 2, 1, false},
                            Window{"2x2 ceil mode", 2, 2, 0, true}}) {
      Pool2dOptions pool;
      pool.kernel_h = pool.kernel_w = w.kernel;
      pool.stride_h = pool.stride_w = w.stride;
      pool.pad_h = pool.pad_w = w.pad;
      pool.ceil_mode = w.ceil_mode;
      add(cases, std::string("batch_norm_relu_max_pool2d ") + (training ? "train " : "eval ") + w.name,
          "batch_norm_relu_max_pool2d",
          [training, pool](In v) {
            return batch_norm_relu_max_pool2d(v[0], v[1], v[2], v[3], v[4], training, 0.1, 1e-5, pool);
          },
          {tensor(pooled_x, large_pooled_x, -2, 2), weight, bias, running_mean, running_var}, tolerances);
    }
  }

  // A first stage in inference (conv, BatchNorm with running statistics, ReLU, 2x2 max-pool). The
  // gradient check records the op, which then runs the separate ops; the agreement test does not,
  // so the CPU runs the fused kernel of kernels/conv_batch_norm_pool.h against CUDA's separate ops.
  // (tests/engine/test_conv_batch_norm_pool.cpp compares the kernel with the separate ops.)
  Conv2dOptions conv;
  conv.pad_h = conv.pad_w = 1;
  add(cases, "conv2d_batch_norm_relu_max_pool2d 3x3 pad 1, 2x2", "conv2d_batch_norm_relu_max_pool2d",
      [conv](In v) {
        return conv2d_batch_norm_relu_max_pool2d(v[0], v[1], v[2], conv, v[3], v[4], v[5], v[6], 1e-5, Pool2dOptions{});
      },
      {tensor({2, 6, 7, 1}, {16, 28, 28, 1}, -2, 2), tensor({3, 3, 3, 1}, {48, 3, 3, 1}, -0.5, 0.5),
       tensor({3}, {48}, -0.5, 0.5), weight, bias, running_mean, running_var},
      {{DType::f32, 2e-3}});  // TF32 may be used for the convolution on the GPU, as in the conv2d cases

  // A convolution and its BatchNorm in inference, with the residual and the ReLU of a block's last
  // pair. Recorded (the gradient check) it runs the separate ops; unrecorded on a CPU with oneDNN
  // the folded convolution, against CUDA's separate ops. (tests/engine/test_conv_batch_norm_fold.cpp
  // compares the folded convolution with the separate ops.)
  add(cases, "conv2d_batch_norm2d 3x3 pad 1, add_relu", "conv2d_batch_norm2d",
      [conv](In v) {
        return conv2d_batch_norm2d(v[0], v[1], v[2], conv, v[3], v[4], v[5], v[6], 1e-5, BatchNormActivation::add_relu,
                                   v[7]);
      },
      {tensor({2, 6, 7, 4}, {16, 28, 28, 32}, -2, 2), tensor({3, 3, 3, 4}, {48, 3, 3, 32}, -0.5, 0.5),
       tensor({3}, {48}, -0.5, 0.5), weight, bias, running_mean, running_var,
       tensor({2, 6, 7, 3}, {16, 28, 28, 48}, -1, 1)},
      {{DType::f32, 2e-3}});
}

void pools(std::vector<OpCase>& cases) {
  const Shape x{2, 6, 7, 3}, large_x{8, 33, 31, 24};
  Pool2dOptions o;
  o.kernel_h = o.kernel_w = 3;
  o.stride_h = o.stride_w = 2;
  o.pad_h = o.pad_w = 1;
  for (bool ceil_mode : {false, true}) {
    o.ceil_mode = ceil_mode;
    const std::string mode = ceil_mode ? " ceil mode" : "";
    // Ties have no gradient: uniform draws are distinct. The maximum is exact on both backends.
    add(cases, "max_pool2d 3x3 stride 2 pad 1" + mode, "max_pool2d", [o](In v) { return max_pool2d(v[0], o); },
        {tensor(x, large_x, -2, 2)}, {{DType::f32, 0.0}});
    for (bool include : {true, false}) {
      Pool2dOptions a = o;
      a.count_include_pad = include;
      add(cases, "avg_pool2d 3x3 stride 2 pad 1" + mode + (include ? "" : " excluding padding"), "avg_pool2d",
          [a](In v) { return avg_pool2d(v[0], a); }, {tensor(x, large_x, -2, 2)});
    }
  }
  // Windows that cannot overlap (stride >= kernel) take the CPU's gather backward: windows that tile
  // the image, windows that leave its last column (and, in ceil mode, nothing) uncovered, and gaps.
  struct Disjoint {
    const char* name;
    Shape shape;
    int kernel, stride;
    bool ceil_mode;
  };
  for (const Disjoint& d : {Disjoint{"2x2 stride 2, tiling", {2, 6, 8, 3}, 2, 2, false},
                            Disjoint{"2x2 stride 2, last column uncovered", {2, 6, 7, 3}, 2, 2, false},
                            Disjoint{"2x2 stride 2 ceil mode, last window clipped", {2, 6, 7, 3}, 2, 2, true},
                            Disjoint{"2x2 stride 3, gaps", {2, 7, 8, 3}, 2, 3, false}}) {
    Pool2dOptions p;
    p.kernel_h = p.kernel_w = d.kernel;
    p.stride_h = p.stride_w = d.stride;
    p.ceil_mode = d.ceil_mode;
    add(cases, std::string("max_pool2d ") + d.name, "max_pool2d", [p](In v) { return max_pool2d(v[0], p); },
        {tensor(d.shape, large_x, -2, 2)}, {{DType::f32, 0.0}});
  }
  add(cases, "adaptive_avg_pool2d to 3x2", "adaptive_avg_pool2d", [](In v) { return adaptive_avg_pool2d(v[0], 3, 2); },
      {tensor({2, 7, 5, 3}, large_x, -2, 2)});
  add(cases, "adaptive_avg_pool2d to 7x7", "adaptive_avg_pool2d", [](In v) { return adaptive_avg_pool2d(v[0], 7, 7); },
      {tensor({1, 9, 8, 2}, large_x, -2, 2)});
  add(cases, "adaptive_avg_pool2d to its own size (the identity)", "adaptive_avg_pool2d",
      [](In v) { return adaptive_avg_pool2d(v[0], 4, 3); }, {tensor({2, 4, 3, 5}, {8, 4, 3, 16}, -2, 2)});
  add(cases, "global_avg_pool2d", "global_avg_pool2d", [](In v) { return global_avg_pool2d(v[0]); },
      {tensor({2, 4, 3, 5}, large_x, -2, 2)});
}

void regularisation_and_shapes(std::vector<OpCase>& cases) {
  const Shape large_x{8, 33, 31, 24};
  // Masks are the same Philox draws on both backends: exact.
  add(cases, "dropout", "dropout", [](In v) { return dropout(v[0], 0.3, 7, 100); }, {tensor({4, 6}, large_x, -2, 2)},
      {{DType::f32, 0.0}});
  add(cases, "drop_path", "drop_path", [](In v) { return drop_path(v[0], 0.4, 7, 0); },
      {tensor({6, 2, 2, 3}, large_x, -2, 2)}, {{DType::f32, 0.0}});
  add(cases, "concat_channels", "concat_channels",
      [](In v) {
        return concat_channels({v[0], v[1], v[2]});
      },
      {tensor({2, 3, 3, 2}, large_x, -2, 2), tensor({2, 3, 3, 4}, {8, 33, 31, 8}, -2, 2),
       tensor({2, 3, 3, 1}, {8, 33, 31, 1}, -2, 2)},
      {{DType::f32, 0.0}});
  add(cases, "transpose_last2", "transpose_last2", [](In v) { return transpose_last2(v[0]); },
      {tensor({2, 3, 5}, {8, 33 * 31, 24}, -2, 2)}, {{DType::f32, 0.0}});
}

std::vector<OpCase> build_table() {
  std::vector<OpCase> cases;
  unary_ops(cases);
  binary_ops(cases);
  reductions(cases);
  matrix_products(cases);
  softmax_family(cases);
  casts(cases);
  views(cases);
  convolutions(cases);
  batch_norms(cases);
  pools(cases);
  regularisation_and_shapes(cases);
  return cases;
}

uint64_t seed_of(const std::string& name, size_t input) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (char ch : name) h = (h ^ static_cast<unsigned char>(ch)) * 1099511628211ull;
  return h + 7919 * input;
}
}  // namespace

const std::vector<OpCase>& op_cases() {
  static const std::vector<OpCase> cases = build_table();
  return cases;
}

std::vector<Tensor> make_inputs(const OpCase& c, bool large, DType dtype) {
  NoGrad no_grad;
  const auto shape_of = [&](const Input& in) { return large && in.large.rank() > 0 ? in.large : in.shape; };
  std::vector<Tensor> out;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    const Input& in = c.inputs[i];
    const Shape shape = shape_of(in);
    const uint64_t seed = seed_of(c.name, i);
    Tensor t;
    switch (in.values) {
      case Values::uniform:
        t = Tensor::uniform(shape, in.low, in.high, seed, DType::f64);
        break;
      case Values::away_from_zero: {
        t = Tensor::uniform(shape, -1.0, 1.0, seed, DType::f64);
        double* d = t.data_as<double>();
        for (int64_t j = 0; j < t.numel(); ++j)
          d[j] = (d[j] < 0 ? -1 : 1) * (in.low + (in.high - in.low) * std::fabs(d[j]));
        break;
      }
      case Values::labels: {
        const Shape logits = shape_of(c.inputs.at(0));
        const int64_t classes = logits[logits.rank() - 1];
        std::vector<int64_t> labels;
        for (double u : Tensor::uniform(shape, 0.0, 1.0, seed, DType::f64).to_doubles())
          labels.push_back(std::min(classes - 1, static_cast<int64_t>(u * static_cast<double>(classes))));
        t = Tensor::from_vector<int64_t>(labels, shape);
        break;
      }
      case Values::distribution:
        t = softmax(Tensor::uniform(shape, in.low, in.high, seed, DType::f64));
        break;
    }
    if (is_floating(t.dtype())) {
      const DType want = in.accumulate ? accumulate_dtype(dtype) : dtype;
      if (want != t.dtype()) t = t.to(want);
    }
    out.push_back(t);
  }
  return out;
}

std::vector<bool> differentiable_inputs(const OpCase& c) {
  std::vector<bool> d;
  for (const Input& in : c.inputs) d.push_back(in.differentiable);
  return d;
}

HeldSetting::HeldSetting(const OpCase& c) {
  if (c.setting) restore_ = c.setting();
}
HeldSetting::~HeldSetting() {
  if (restore_) restore_();
}

namespace {
struct Registered {
  const OpCase* c;
  void (*run)(const OpCase&);
};
std::map<std::string, Registered>& registry() {
  static std::map<std::string, Registered> r;
  return r;
}

// The function of every registered test: finds its case by the running test's name.
void run_registered() {
  const doctest::detail::TestCase* current = doctest::getContextOptions()->currentTest;
  REQUIRE(current != nullptr);
  const auto it = registry().find(current->m_name);
  REQUIRE(it != registry().end());
  it->second.run(*it->second.c);
}
}  // namespace

bool register_op_tests(const char* prefix, bool (*select)(const OpCase&), void (*run)(const OpCase&), const char* file,
                       int line) {
  static std::deque<std::string> names;  // doctest keeps the pointer
  for (const OpCase& c : op_cases()) {
    if (!select(c)) continue;
    const std::string& name = names.emplace_back(prefix + c.name);
    registry()[name] = {&c, run};
    doctest::detail::regTest(doctest::detail::TestCase(run_registered, file, static_cast<unsigned>(line),
                                                       doctest_detail_test_suite_ns::getCurrentTestSuite()) *
                             name.c_str());
  }
  return true;
}

}  // namespace cnn::testing
