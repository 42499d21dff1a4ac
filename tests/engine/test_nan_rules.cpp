// The rules every backend shares through kernels/common: PyTorch's NaN rule of the maximum (a NaN in
// a window or along an axis gives NaN and takes the gradient; the first of equal values wins), and
// PyTorch's output size of a convolution or pooling window.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "engine/cnn.h"
#include "kernels/common/max_math.h"
#include "kernels/common/window.h"

using namespace cnn;

namespace {
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// The gradient of sum(f(x)) with respect to x.
template <class F>
std::vector<double> gradient_of(Tensor x, F f) {
  x.requires_grad_();
  Tape tape;
  Tensor loss;
  {
    Tape::Recording rec(tape);
    loss = sum(f(x));
  }
  tape.backward(loss);
  return x.grad().to_doubles();
}
}  // namespace

TEST_CASE("the maximum's rule: NaN beats every number, the first of equals and of NaNs wins") {
  CHECK(max_replaces(kNaN, 1.0));
  CHECK(max_replaces(kNaN, -kInf));
  CHECK(max_replaces(kNaN, kInf));
  CHECK_FALSE(max_replaces(1.0, kNaN));
  CHECK_FALSE(max_replaces(kNaN, kNaN));  // the first NaN stays
  CHECK_FALSE(max_replaces(2.0, 2.0));    // the first of equals stays
  CHECK(max_replaces(3.0, 2.0));
  CHECK(std::isnan(max_of(kNaN, 1.0)));
  CHECK(std::isnan(max_of(1.0, kNaN)));
  CHECK(max_of(-1.0, 2.0) == 2.0);
  CHECK(max_of(2.0f, -1.0f) == 2.0f);
  // Pairs in any order, as a tree reduction meets them.
  CHECK(max_pair_replaces(kNaN, 5, 9.0, 1));
  CHECK_FALSE(max_pair_replaces(9.0, 1, kNaN, 5));
  CHECK(max_pair_replaces(kNaN, 2, kNaN, 5));
  CHECK_FALSE(max_pair_replaces(kNaN, 5, kNaN, 2));
  CHECK(max_pair_replaces(4.0, 2, 4.0, 5));
  CHECK_FALSE(max_pair_replaces(4.0, 5, 4.0, 2));
  CHECK_FALSE(max_pair_replaces(3.0, 0, 4.0, 5));
}

TEST_CASE("max over the last axis: a NaN in the row gives NaN, at the first NaN's index, which takes the gradient") {
  for (DType dt : {DType::f32, DType::f64, DType::f16, DType::bf16}) {
    INFO(dtype_name(dt));
    // Rows: NaN in the middle; NaN first; two NaNs; no NaN with a tie; -inf and NaN.
    const Tensor x = Tensor::from_vector<double>({1, kNaN, 3, 0,  //
                                                  kNaN, 5, 6, 7,  //
                                                  2, kNaN, 9, kNaN,  //
                                                  4, 8, 8, -1,  //
                                                  -kInf, -kInf, kNaN, -kInf},
                                                 {5, 4})
                         .to(dt);
    const auto [values, indices] = max_last(x);
    const std::vector<double> v = values.to_doubles(), i = indices.to_doubles();
    CHECK(std::isnan(v[0]));
    CHECK(std::isnan(v[1]));
    CHECK(std::isnan(v[2]));
    CHECK(v[3] == 8.0);
    CHECK(std::isnan(v[4]));
    CHECK(i == std::vector<double>{1, 0, 1, 1, 2});
    const std::vector<double> g = gradient_of(x, [](const Tensor& t) { return max_last(t).first; });
    CHECK(g == std::vector<double>{0, 1, 0, 0,  //
                                   1, 0, 0, 0,  //
                                   0, 1, 0, 0,  //
                                   0, 1, 0, 0,  //
                                   0, 0, 1, 0});
  }
}

TEST_CASE("max_pool2d: a NaN in a window gives NaN there and takes that window's gradient") {
  for (DType dt : {DType::f32, DType::f64, DType::f16, DType::bf16}) {
    INFO(dtype_name(dt));
    // One 4x4 image, two channels, 2x2 windows (stride 2). Channel 0 has a NaN in the top-left window
    // and two NaNs in the bottom-right one; channel 1 has none (its windows tie at their maximum).
    std::vector<double> values(32);
    for (int p = 0; p < 16; ++p) {
      values[static_cast<size_t>(2 * p)] = p;
      values[static_cast<size_t>(2 * p + 1)] = (p % 4) / 2;  // 0 0 1 1 in every row: ties
    }
    values[2 * 5] = kNaN;   // (1, 1): top-left window
    values[2 * 11] = kNaN;  // (2, 3): bottom-right window, first in row-major order
    values[2 * 14] = kNaN;  // (3, 2): bottom-right window, second
    values[2 * 15] = -kInf;
    const Tensor x = Tensor::from_vector<double>(values, {1, 4, 4, 2}).to(dt);
    const std::vector<double> y = max_pool2d(x, Pool2dOptions{}).to_doubles();
    REQUIRE(y.size() == 8);
    CHECK(std::isnan(y[0]));
    CHECK(y[1] == 0);
    CHECK(y[2] == 7);  // top-right window: 2, 3, 6, 7
    CHECK(y[3] == 1);
    CHECK(y[4] == 13);  // bottom-left window: 8, 9, 12, 13
    CHECK(y[5] == 0);
    CHECK(std::isnan(y[6]));
    CHECK(y[7] == 1);
    const std::vector<double> g = gradient_of(x, [](const Tensor& t) { return max_pool2d(t, Pool2dOptions{}); });
    std::vector<double> want(32, 0.0);
    for (int p : {5, 7, 13, 11}) want[static_cast<size_t>(2 * p)] = 1;  // NaN, max, max, the first NaN
    for (int p : {0, 2, 8, 10}) want[static_cast<size_t>(2 * p + 1)] = 1;  // the first of each tie
    CHECK(g == want);
  }
}

TEST_CASE("softmax and cross-entropy of a row with a NaN are NaN in that row only") {
  const Tensor x = Tensor::from_vector<float>({1, 2, std::nanf(""), 0, 1, 2}, {2, 3});
  const std::vector<double> s = softmax(x).to_doubles(), l = log_softmax(x).to_doubles();
  for (size_t i = 0; i < 3; ++i) {
    CHECK(std::isnan(s[i]));
    CHECK(std::isnan(l[i]));
  }
  for (size_t i = 3; i < 6; ++i) CHECK(std::isfinite(s[i]));
  const Tensor labels = Tensor::from_vector<int64_t>({0, 1}, {2});
  CHECK(std::isnan(cross_entropy(x, labels).item()));
  CHECK(std::isfinite(cross_entropy(x.reshape({2, 3}).slice(1, 2), labels.slice(1, 2)).item()));
}

TEST_CASE("window output size: PyTorch's formula, with floor division and ceil mode") {
  CHECK(window_output_size(224, 7, 2, 3, 1, false) == 112);
  CHECK(window_output_size(112, 3, 2, 1, 1, false) == 56);
  CHECK(window_output_size(5, 2, 2, 0, 1, false) == 2);
  CHECK(window_output_size(5, 2, 2, 0, 1, true) == 3);
  CHECK(window_output_size(6, 3, 2, 1, 1, true) == 4);
  CHECK(window_output_size(5, 2, 2, 1, 1, true) == 3);  // a 4th window would start in the right padding
  CHECK(window_output_size(7, 3, 1, 2, 2, false) == 7);  // dilation 2: a 5-wide window
  CHECK(window_output_size(3, 3, 1, 0, 1, false) == 1);
  // An input smaller than the window: no output, even where truncating division would give one.
  CHECK(window_output_size(2, 3, 2, 0, 1, false) <= 0);
  CHECK(window_output_size(1, 3, 1, 0, 1, false) <= 0);
  CHECK(window_output_size(4, 3, 2, 0, 3, false) <= 0);
  // ceil_mode keeps a last window that starts inside the input (PyTorch: 2x2 input, 3x3 window, stride 2).
  CHECK(window_output_size(2, 3, 2, 0, 1, true) == 1);
  CHECK(floor_div(-1, 2) == -1);
  CHECK(floor_div(-4, 2) == -2);
  CHECK(floor_div(3, 2) == 1);
}

TEST_CASE("conv2d and the pools refuse an input smaller than the window, as the shape pass does") {
  Conv2dOptions strided;
  strided.stride_h = strided.stride_w = 2;
  CHECK_THROWS_AS(conv2d(Tensor::zeros({1, 2, 2, 1}), Tensor::zeros({1, 3, 3, 1}), Tensor(), strided), Error);
  Pool2dOptions o;
  o.kernel_h = o.kernel_w = 3;
  o.stride_h = o.stride_w = 2;
  CHECK_THROWS_AS(max_pool2d(Tensor::zeros({1, 2, 2, 1}), o), Error);
  CHECK_THROWS_AS(avg_pool2d(Tensor::zeros({1, 2, 2, 1}), o), Error);
  o.ceil_mode = true;
  CHECK(max_pool2d(Tensor::zeros({1, 2, 2, 1}), o).shape() == Shape{1, 1, 1, 1});
}
