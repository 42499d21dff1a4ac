// conv2d_batch_norm2d: on the CPU with oneDNN, one convolution with the eval-mode BatchNorm folded
// in (its scale into the weights, its shift into the bias, the residual and the ReLU into the
// epilogue). Measured against an exact (f64) run of the separate ops on the same inputs, its error
// stays within that of conv2d then batch_norm2d in the same dtype (plus the rounding of the scaled
// weights, in bf16), over the geometries ResNets run (3x3, 1x1, strided 1x1, a 7x7/2 stem), every
// activation, with and without a convolution bias and BatchNorm affine terms. Where it does not
// apply (a gradient recorded, groups, f64) the op is the separate ops, bit for bit.
#include <doctest/doctest.h>

#include "engine/config.h"

#if CNN_WITH_ONEDNN
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "engine/cnn.h"
#include "engine/profiler.h"

using namespace cnn;

namespace {

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() &&
         std::memcmp(a.data(), b.data(), static_cast<size_t>(a.numel()) * dtype_size(a.dtype())) == 0;
}

struct Case {
  const char* name;
  int64_t n, h, c, o, k;
  int stride, pad;
};

const Case kCases[] = {
    {"3x3, stride 1", 2, 9, 16, 24, 3, 1, 1},
    {"1x1, stride 1", 2, 7, 32, 16, 1, 1, 0},
    {"1x1, stride 2 (a downsample)", 2, 8, 16, 32, 1, 2, 0},
    {"3x3, stride 2", 2, 11, 8, 16, 3, 2, 1},
    {"7x7, stride 2, 3 channels (a stem)", 1, 20, 3, 8, 7, 2, 3},
};

struct Inputs {
  Tensor x, w, conv_bias, weight, bias, mean, var, residual;
  Conv2dOptions conv;

  Inputs(const Case& c, DType dt, bool with_conv_bias, bool affine, uint64_t seed) {
    conv.stride_h = conv.stride_w = c.stride;
    conv.pad_h = conv.pad_w = c.pad;
    x = Tensor::uniform({c.n, c.h, c.h, c.c}, -1, 1, seed, dt);
    w = Tensor::uniform({c.o, c.k, c.k, c.c}, -0.5, 0.5, seed + 1, dt);
    if (with_conv_bias) conv_bias = Tensor::uniform({c.o}, -1, 1, seed + 2, dt);
    const DType statistics = dt == DType::f64 ? DType::f64 : DType::f32;
    if (affine) {
      weight = Tensor::uniform({c.o}, 0.5, 1.5, seed + 3, statistics);
      bias = Tensor::uniform({c.o}, -0.5, 0.5, seed + 4, statistics);
    }
    mean = Tensor::uniform({c.o}, -0.5, 0.5, seed + 5, statistics);
    var = Tensor::uniform({c.o}, 0.5, 2.0, seed + 6, statistics);
    const int64_t oh = (c.h + 2 * c.pad - c.k) / c.stride + 1;
    residual = Tensor::uniform({c.n, oh, oh, c.o}, -1, 1, seed + 7, dt);
  }

  Tensor folded(BatchNormActivation act) const {
    return conv2d_batch_norm2d(x, w, conv_bias, conv, weight, bias, mean, var, 1e-5, act,
                               act == BatchNormActivation::add_relu ? residual : Tensor());
  }
  // The separate ops, on these inputs cast to `dt` (f64: the exact reference).
  Tensor separate(BatchNormActivation act, DType dt) const {
    const auto as = [&](const Tensor& t) { return t.defined() ? cast(t, dt) : t; };
    const DType statistics = dt == DType::f64 ? DType::f64 : DType::f32;
    const auto stat = [&](const Tensor& t) { return t.defined() ? cast(t, statistics) : t; };
    return batch_norm2d(conv2d(as(x), as(w), as(conv_bias), conv), stat(weight), stat(bias), stat(mean), stat(var),
                        false, 0.1, 1e-5, act, act == BatchNormActivation::add_relu ? as(residual) : Tensor());
  }
  bool folds(BatchNormActivation act) const {
    return conv2d_batch_norm2d_folds(x, w, conv_bias, conv, weight, bias, act,
                                     act == BatchNormActivation::add_relu ? residual : Tensor());
  }
};

// The largest |a - exact| over the elements, and the largest |exact|.
std::pair<double, double> error_of(const Tensor& a, const Tensor& exact) {
  REQUIRE(a.shape() == exact.shape());
  const std::vector<double> va = a.to_doubles(), ve = exact.to_doubles();
  double worst = 0, scale = 0;
  for (size_t i = 0; i < va.size(); ++i) {
    worst = std::isnan(va[i]) ? INFINITY : std::max(worst, std::abs(va[i] - ve[i]));
    scale = std::max(scale, std::abs(ve[i]));
  }
  return {worst, scale};
}

const BatchNormActivation kActivations[] = {BatchNormActivation::none, BatchNormActivation::relu,
                                            BatchNormActivation::add_relu};

const char* name_of(BatchNormActivation a) {
  return a == BatchNormActivation::none ? "none" : a == BatchNormActivation::relu ? "relu" : "add_relu";
}

}  // namespace

TEST_CASE("conv2d_batch_norm2d folds the BatchNorm into one oneDNN convolution, as close to exact as the separate ops") {
  const CpuConvolutions before = cpu_convolutions();
  set_cpu_convolutions(CpuConvolutions::onednn);
  NoGrad no_grad;
  uint64_t seed = 40;
  for (DType dt : {DType::f32, DType::bf16})
    for (const Case& c : kCases)
      for (BatchNormActivation act : kActivations)
        for (bool with_conv_bias : {false, true})
          for (bool affine : {true, false}) {
            CAPTURE(dtype_name(dt));
            CAPTURE(c.name);
            CAPTURE(name_of(act));
            CAPTURE(with_conv_bias);
            CAPTURE(affine);
            const Inputs in(c, dt, with_conv_bias, affine, seed += 10);
            REQUIRE(in.folds(act));
            const Tensor exact = in.separate(act, DType::f64);
            const auto [folded, scale] = error_of(in.folded(act), exact);
            const auto [separate, unused] = error_of(in.separate(act, dt), exact);
            CAPTURE(folded);
            CAPTURE(separate);
            // f32: the scaled weights and another summation order; within a few f32 roundings of
            // the output's size. bf16: the separate ops round the convolution's output to bf16 and
            // then the BatchNorm's; the folded one rounds the scaled weights to bf16 and the output
            // once: within two bf16 steps (2^-7) of the output's size.
            const double allowed = dt == DType::f32 ? 2e-6 * (1 + scale) : std::ldexp(1.0, -7) * (1 + scale);
            CHECK(folded <= std::max(2 * separate, allowed));
          }
  set_cpu_convolutions(before);
}

TEST_CASE("conv2d_batch_norm2d runs the one convolution alone (no BatchNorm pass) where it folds") {
  const Inputs in(kCases[0], DType::f32, false, true, 7);
  NoGrad no_grad;
  profiler::start();
  in.folded(BatchNormActivation::relu);
  const profiler::Recording recording = profiler::stop();
  std::vector<std::string> names;
  for (const profiler::Span& span : recording.spans) names.push_back(span.name);
  CHECK(std::find(names.begin(), names.end(), "conv2d_batch_norm_forward") != names.end());
  CHECK(std::find(names.begin(), names.end(), "batch_norm_forward") == names.end());
  CHECK(std::find(names.begin(), names.end(), "conv2d_forward") == names.end());
}

TEST_CASE("conv2d_batch_norm2d: where it does not fold, the separate ops bit for bit, gradients included") {
  const Case& c = kCases[0];
  SUBCASE("a gradient is being recorded") {
    Inputs in(c, DType::f32, true, true, 3);
    in.x.requires_grad_();
    in.w.requires_grad_();
    Tape tape;
    Tensor ours, theirs;
    {
      Tape::Recording recording(tape);
      CHECK_FALSE(in.folds(BatchNormActivation::add_relu));
      ours = in.folded(BatchNormActivation::add_relu);
      tape.backward(sum(mul(ours, ours)));
    }
    const Tensor dx = in.x.grad().clone(), dw = in.w.grad().clone();
    in.x.zero_grad();
    in.w.zero_grad();
    Tape tape2;
    {
      Tape::Recording recording(tape2);
      theirs = in.separate(BatchNormActivation::add_relu, DType::f32);
      tape2.backward(sum(mul(theirs, theirs)));
    }
    CHECK(same_bits(ours, theirs));
    CHECK(same_bits(dx, in.x.grad()));
    CHECK(same_bits(dw, in.w.grad()));
  }
  SUBCASE("groups, f64, the reference convolutions") {
    NoGrad no_grad;
    Inputs grouped(c, DType::f32, false, true, 5);
    grouped.conv.groups = 2;
    grouped.w = Tensor::uniform({c.o, c.k, c.k, c.c / 2}, -0.5, 0.5, 6);
    CHECK_FALSE(grouped.folds(BatchNormActivation::relu));
    CHECK(same_bits(grouped.folded(BatchNormActivation::relu), grouped.separate(BatchNormActivation::relu, DType::f32)));
    const Inputs f64(c, DType::f64, false, true, 8);
    CHECK_FALSE(f64.folds(BatchNormActivation::relu));
    CHECK(same_bits(f64.folded(BatchNormActivation::relu), f64.separate(BatchNormActivation::relu, DType::f64)));
    const CpuConvolutions before = cpu_convolutions();
    set_cpu_convolutions(CpuConvolutions::reference);
    const Inputs f32(c, DType::f32, false, true, 9);
    CHECK_FALSE(f32.folds(BatchNormActivation::relu));
    CHECK(same_bits(f32.folded(BatchNormActivation::relu), f32.separate(BatchNormActivation::relu, DType::f32)));
    set_cpu_convolutions(before);
  }
}

TEST_CASE("conv2d_batch_norm2d refuses a residual of the wrong shape with a message") {
  NoGrad no_grad;
  Inputs in(kCases[0], DType::f32, false, true, 11);
  in.residual = Tensor::zeros({1, 2, 3, 4});
  CHECK_THROWS_WITH_AS(in.folded(BatchNormActivation::add_relu), doctest::Contains("the residual"), Error);
}
#endif
