// conv2d_batch_norm_relu_max_pool2d: on the CPU its inference kernel (kernels/conv_batch_norm_pool.h)
// gives the values of conv2d, batch_norm2d (eval, relu) and max_pool2d run one after the other, up
// to the rounding of the convolution's sum, for every geometry it takes (input channels 1 to 4,
// output channels in whole and partial vector blocks, strides, padding, dilation, bias or none,
// pooling windows that tile, leave pixels out, clip or are padded), and NaNs come through as the
// max-pool's rule has them. Where it does not apply (a gradient is being recorded, too many input
// channels, f16/bf16, overlapping windows) the op is the three ops, bit for bit.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "engine/cnn.h"
#include "engine/profiler.h"
#include "kernels/conv_batch_norm_pool.h"

using namespace cnn;

namespace {

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() &&
         std::memcmp(a.data(), b.data(), static_cast<size_t>(a.numel()) * dtype_size(a.dtype())) == 0;
}

// The largest |a - b| / (1 + |b|) over the elements; infinity where one is NaN and the other not.
double largest_difference(const Tensor& a, const Tensor& b) {
  REQUIRE(a.shape() == b.shape());
  const std::vector<double> va = a.to_doubles(), vb = b.to_doubles();
  double worst = 0;
  for (size_t i = 0; i < va.size(); ++i) {
    if (std::isnan(va[i]) || std::isnan(vb[i])) {
      if (std::isnan(va[i]) != std::isnan(vb[i])) return std::numeric_limits<double>::infinity();
      continue;
    }
    worst = std::max(worst, std::abs(va[i] - vb[i]) / (1 + std::abs(vb[i])));
  }
  return worst;
}

// Whether the last call of `f` ran the fused inference kernel.
template <class F>
bool runs_fused_kernel(F f) {
  profiler::start();
  f();
  const profiler::Recording recording = profiler::stop();
  for (const profiler::Span& span : recording.spans)
    if (span.name == "conv_batch_norm_relu_max_pool_forward") return true;
  return false;
}

struct Stage {
  Tensor x, w, conv_bias, weight, bias, mean, var;
  Conv2dOptions conv;
  Pool2dOptions pool;

  Tensor fused() const {
    return conv2d_batch_norm_relu_max_pool2d(x, w, conv_bias, conv, weight, bias, mean, var, 1e-5, pool);
  }
  Tensor separate() const {
    return max_pool2d(batch_norm2d(conv2d(x, w, conv_bias, conv), weight, bias, mean, var, false, 0.1, 1e-5,
                                   BatchNormActivation::relu),
                      pool);
  }
};

Stage make_stage(DType dt, int64_t n, int64_t h, int64_t w, int64_t c, int64_t o, int kernel, bool with_bias,
                 bool with_affine, uint64_t seed) {
  Stage s;
  s.x = Tensor::uniform({n, h, w, c}, -2, 2, seed, dt);
  s.w = Tensor::uniform({o, kernel, kernel, c}, -0.5, 0.5, seed + 1, dt);
  if (with_bias) s.conv_bias = Tensor::uniform({o}, -0.5, 0.5, seed + 2, dt);
  const DType acc = accumulate_dtype(dt);
  if (with_affine) {
    s.weight = Tensor::uniform({o}, 0.5, 1.5, seed + 3, acc);
    s.bias = Tensor::uniform({o}, -0.5, 0.5, seed + 4, acc);
  }
  s.mean = Tensor::uniform({o}, -0.5, 0.5, seed + 5, acc);
  s.var = Tensor::uniform({o}, 0.5, 2.0, seed + 6, acc);
  return s;
}

}  // namespace

TEST_CASE("conv2d_batch_norm_relu_max_pool2d on the CPU: the separate ops' values, up to the convolution's rounding") {
  NoGrad no_grad;
  struct Geometry {
    const char* name;
    int64_t h, w, c, o;
    int kernel;
    Conv2dOptions conv;
    Pool2dOptions pool;
  };
  const Geometry geometries[] = {
      {"compact_cnn's 1 -> 32, 3x3 pad 1, 2x2", 12, 12, 1, 32, 3, Conv2dOptions{1, 1, 1, 1, 1, 1, 1},
       Pool2dOptions{2, 2, 2, 2, 0, 0, false}},
      {"RGB -> 20 (a partial block), odd size", 11, 9, 3, 20, 3, Conv2dOptions{1, 1, 1, 1, 1, 1, 1},
       Pool2dOptions{2, 2, 2, 2, 0, 0, false}},
      {"4 -> 70 (blocks and a partial one)", 8, 8, 4, 70, 3, Conv2dOptions{1, 1, 1, 1, 1, 1, 1},
       Pool2dOptions{2, 2, 2, 2, 0, 0, false}},
      {"2 -> 5 (less than a block)", 7, 8, 2, 5, 3, Conv2dOptions{1, 1, 0, 0, 1, 1, 1},
       Pool2dOptions{2, 2, 2, 2, 0, 0, false}},
      {"5x5 stride 2 pad 2", 13, 12, 3, 16, 5, Conv2dOptions{2, 2, 2, 2, 1, 1, 1},
       Pool2dOptions{2, 2, 2, 2, 0, 0, false}},
      {"dilation 2", 12, 11, 1, 24, 3, Conv2dOptions{1, 1, 2, 2, 2, 2, 1}, Pool2dOptions{2, 2, 2, 2, 0, 0, false}},
      {"3x3 windows stride 3 (pixels left out)", 14, 13, 1, 32, 3, Conv2dOptions{1, 1, 1, 1, 1, 1, 1},
       Pool2dOptions{3, 3, 3, 3, 0, 0, false}},
      {"2x2 windows in ceil mode (clipped)", 9, 11, 1, 32, 3, Conv2dOptions{1, 1, 1, 1, 1, 1, 1},
       Pool2dOptions{2, 2, 2, 2, 0, 0, true}},
      {"2x2 windows padded by 1", 8, 9, 1, 32, 3, Conv2dOptions{1, 1, 1, 1, 1, 1, 1},
       Pool2dOptions{2, 2, 2, 2, 1, 1, false}},
      {"2x2 windows stride 3 (gaps)", 11, 11, 2, 32, 3, Conv2dOptions{1, 1, 1, 1, 1, 1, 1},
       Pool2dOptions{2, 2, 3, 3, 0, 0, false}},
      {"1x1 convolution", 6, 6, 3, 32, 1, Conv2dOptions{1, 1, 0, 0, 1, 1, 1}, Pool2dOptions{2, 2, 2, 2, 0, 0, false}},
  };
  for (const Geometry& g : geometries) {
    for (DType dt : {DType::f32, DType::f64}) {
      for (bool with_bias : {false, true}) {
        for (bool with_affine : {false, true}) {
          CAPTURE(g.name);
          CAPTURE(dtype_name(dt));
          CAPTURE(with_bias);
          CAPTURE(with_affine);
          Stage s = make_stage(dt, 3, g.h, g.w, g.c, g.o, g.kernel, with_bias, with_affine, 11);
          s.conv = g.conv;
          s.pool = g.pool;
          Tensor y;
          CHECK(runs_fused_kernel([&] { y = s.fused(); }));
          const Tensor expected = s.separate();
          REQUIRE(y.shape() == expected.shape());
          CHECK(largest_difference(y, expected) < (dt == DType::f64 ? 1e-13 : 2e-6));
        }
      }
    }
  }
}

TEST_CASE("conv2d_batch_norm_relu_max_pool2d: a NaN in the input makes its windows NaN, as the separate ops do") {
  NoGrad no_grad;
  Stage s = make_stage(DType::f32, 2, 10, 10, 1, 32, 3, true, true, 3);
  s.conv = Conv2dOptions{1, 1, 1, 1, 1, 1, 1};
  std::vector<double> x = s.x.to_doubles();
  x[0] = x[57] = x[199] = std::numeric_limits<double>::quiet_NaN();
  s.x = Tensor::from_vector(x, s.x.shape()).to(DType::f32);
  const Tensor y = s.fused(), expected = s.separate();
  const std::vector<double> vy = y.to_doubles();
  const int64_t nans = std::count_if(vy.begin(), vy.end(), [](double v) { return std::isnan(v); });
  CHECK(nans > 0);
  CHECK(largest_difference(y, expected) < 2e-6);  // NaN exactly where the separate ops have it
}

TEST_CASE("conv2d_batch_norm_relu_max_pool2d runs the separate ops, bit for bit, where its kernel does not apply") {
  Stage s = make_stage(DType::f32, 2, 8, 8, 1, 16, 3, true, true, 5);
  s.conv = Conv2dOptions{1, 1, 1, 1, 1, 1, 1};

  SUBCASE("while a gradient is recorded: the gradients of the separate ops") {
    Stage t = s;
    t.x = s.x.clone();
    t.x.requires_grad_();
    Tape tape;
    Tensor y, loss;
    {
      Tape::Recording rec(tape);
      CHECK_FALSE(runs_fused_kernel([&] { y = t.fused(); }));
      loss = sum(y);
    }
    tape.backward(loss);
    Stage u = s;
    u.x = s.x.clone();
    u.x.requires_grad_();
    Tape tape2;
    Tensor expected, expected_loss;
    {
      Tape::Recording rec(tape2);
      expected = u.separate();
      expected_loss = sum(expected);
    }
    tape2.backward(expected_loss);
    CHECK(same_bits(y, expected));
    CHECK(same_bits(t.x.grad(), u.x.grad()));
  }
  SUBCASE("five input channels, bf16, overlapping windows") {
    NoGrad no_grad;
    Stage five = make_stage(DType::f32, 2, 8, 8, 5, 16, 3, true, true, 7),
          bf16 = make_stage(DType::bf16, 2, 8, 8, 1, 16, 3, true, true, 9), overlapping = s;
    overlapping.pool = Pool2dOptions{3, 3, 2, 2, 1, 1, false};
    for (Stage* t : {&five, &bf16, &overlapping}) {
      t->conv = s.conv;
      Tensor y;
      CHECK_FALSE(runs_fused_kernel([&] { y = t->fused(); }));
      CHECK(same_bits(y, t->separate()));
    }
  }
}

TEST_CASE("conv_batch_norm_relu_max_pool_forward refuses what it cannot compute, saying what it needs") {
  const Stage s = make_stage(DType::f32, 1, 6, 6, 5, 8, 3, false, false, 1);
  kernels::ConvGeometry conv = kernels::square_conv_geometry(1, 6, 6, 5, 8, 3, 3, 1, 1);
  kernels::PoolGeometry pool{
      .n = 1, .h = 6, .w = 6, .c = 8, .oh = 3, .ow = 3, .kh = 2, .kw = 2, .stride_h = 2, .stride_w = 2};
  Tensor y = Tensor::empty({1, 3, 3, 8});
  CHECK_THROWS_WITH(
      kernels::cpu::conv_batch_norm_relu_max_pool_forward(DType::f32, conv, pool, s.x.data(), s.w.data(), nullptr,
                                                          s.mean.data(), s.var.data(), nullptr, nullptr, y.data()),
      doctest::Contains("at most 4 input channels"));
  conv.c = 1;
  CHECK_THROWS_WITH(
      kernels::cpu::conv_batch_norm_relu_max_pool_forward(DType::f16, conv, pool, s.x.data(), s.w.data(), nullptr,
                                                          s.mean.data(), s.var.data(), nullptr, nullptr, y.data()),
      doctest::Contains("f32 or f64 only"));
}
