// Forward semantics of the CNN ops against hand-computed values and PyTorch's rules.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>

#include "engine/cnn.h"
#include "kernels/common/philox.h"

using namespace cnn;

TEST_CASE("conv2d computes a hand-checked 2x2 correlation with bias") {
  // x: 1x3x3x1 = 1..9; w: 1x2x2x1 = [[1, 0], [0, -1]]; y[i, j] = x[i, j] - x[i+1, j+1] + 0.5 = -3.5
  const Tensor x = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6, 7, 8, 9}, {1, 3, 3, 1});
  const Tensor w = Tensor::from_vector<float>({1, 0, 0, -1}, {1, 2, 2, 1});
  const Tensor b = Tensor::from_vector<float>({0.5f}, {1});
  const Tensor y = conv2d(x, w, b);
  CHECK(y.shape() == Shape{1, 2, 2, 1});
  CHECK(y.to_doubles() == std::vector<double>{-3.5, -3.5, -3.5, -3.5});
  Conv2dOptions o;
  o.stride_h = o.stride_w = 2;
  o.pad_h = o.pad_w = 1;
  CHECK(conv2d(Tensor::zeros({2, 224, 224, 3}), Tensor::zeros({8, 7, 7, 3}), Tensor(), {2, 2, 3, 3, 1, 1, 1}).shape() ==
        Shape{2, 112, 112, 8});
  CHECK(conv2d(x, w, Tensor(), o).shape() == Shape{1, 2, 2, 1});
}

TEST_CASE("a 1x1 convolution is a matrix product per group, with and without groups") {
  const Tensor x = Tensor::uniform({2, 3, 4, 6}, -1, 1, 31), w = Tensor::uniform({4, 1, 1, 3}, -1, 1, 32);
  const Tensor rows = x.reshape({24, 6});
  // Two groups: output channels 0-1 read input channels 0-2, channels 2-3 read 3-5.
  const std::vector<double> y = conv2d(x, w, Tensor(), {1, 1, 0, 0, 1, 1, 2}).to_doubles();
  const std::vector<double> in = rows.to_doubles(), wv = w.to_doubles();
  double worst = 0;
  for (int64_t p = 0; p < 24; ++p)
    for (int64_t o = 0; o < 4; ++o) {
      double expected = 0;
      for (int64_t c = 0; c < 3; ++c) expected += in[static_cast<size_t>(p * 6 + (o / 2) * 3 + c)] * wv[static_cast<size_t>(o * 3 + c)];
      worst = std::max(worst, std::abs(y[static_cast<size_t>(p * 4 + o)] - expected));
    }
  CHECK(worst < 1e-5);
  const Tensor w1 = Tensor::uniform({5, 1, 1, 6}, -1, 1, 33);
  const std::vector<double> got = conv2d(x, w1).to_doubles();
  const std::vector<double> product = matmul(rows, transpose_last2(w1.reshape({1, 5, 6})).reshape({6, 5})).to_doubles();
  REQUIRE(got.size() == product.size());  // [2, 3, 4, 5] in NHWC is [24, 5] row-major
  for (size_t i = 0; i < got.size(); ++i) CHECK(std::abs(got[i] - product[i]) < 1e-5);
}

TEST_CASE("conv2d refuses mismatched weights with advice") {
  CHECK_THROWS_WITH_AS(conv2d(Tensor::zeros({1, 4, 4, 3}), Tensor::zeros({8, 3, 3, 4})),
                       doctest::Contains("OIHW weights need transposing"), Error);
  CHECK_THROWS_WITH_AS(conv2d(Tensor::zeros({1, 2, 2, 3}), Tensor::zeros({8, 3, 3, 3})),
                       doctest::Contains("output would be empty"), Error);
}

TEST_CASE("batch_norm2d normalises per channel and updates running statistics like PyTorch") {
  // Channel 0: values 1, 3 (mean 2, biased var 1, unbiased 2); channel 1: 10, 10 (var 0).
  const Tensor x = Tensor::from_vector<float>({1, 10, 3, 10}, {2, 1, 1, 2});
  Tensor rm = Tensor::zeros({2}), rv = Tensor::ones({2});
  const Tensor y = batch_norm2d(x, Tensor::ones({2}), Tensor::zeros({2}), rm, rv, true, 0.1, 1e-5);
  const std::vector<double> v = y.to_doubles();
  CHECK(v[0] == doctest::Approx(-1.0 / std::sqrt(1 + 1e-5)));
  CHECK(v[2] == doctest::Approx(1.0 / std::sqrt(1 + 1e-5)));
  CHECK(v[1] == doctest::Approx(0.0));
  CHECK(rm.to_doubles()[0] == doctest::Approx(0.2));   // 0.9 * 0 + 0.1 * 2
  CHECK(rm.to_doubles()[1] == doctest::Approx(1.0));   // 0.1 * 10
  CHECK(rv.to_doubles()[0] == doctest::Approx(1.1));   // 0.9 * 1 + 0.1 * 2 (unbiased)
  CHECK(rv.to_doubles()[1] == doctest::Approx(0.9));
  // Eval mode uses the running statistics.
  const Tensor e = batch_norm2d(x, Tensor(), Tensor(), rm, rv, false);
  CHECK(e.to_doubles()[0] == doctest::Approx((1 - 0.2) / std::sqrt(1.1 + 1e-5)));
  // Fused residual add + relu.
  const Tensor r = batch_norm2d(x, Tensor(), Tensor(), rm, rv, false, 0.1, 1e-5, BatchNormActivation::add_relu,
                                Tensor::full({2, 1, 1, 2}, -100.0));
  for (double value : r.to_doubles()) CHECK(value == 0.0);
}

TEST_CASE("pool output sizes and windows follow PyTorch") {
  Pool2dOptions o;
  o.kernel_h = o.kernel_w = 3;
  o.stride_h = o.stride_w = 2;
  o.pad_h = o.pad_w = 1;
  CHECK(max_pool2d(Tensor::zeros({1, 112, 112, 1}), o).shape() == Shape{1, 56, 56, 1});
  Pool2dOptions two;  // kernel 2, stride 2
  CHECK(max_pool2d(Tensor::zeros({1, 5, 5, 1}), two).shape() == Shape{1, 2, 2, 1});
  two.ceil_mode = true;
  CHECK(max_pool2d(Tensor::zeros({1, 5, 5, 1}), two).shape() == Shape{1, 3, 3, 1});
  // Max-pool ties: the gradient goes to the first maximum in row-major order.
  const Tensor x = Tensor::from_vector<double>({2, 2, 2, 2}, {1, 2, 2, 1}).requires_grad_();
  Tape tape;
  Tensor y;
  {
    Tape::Recording rec(tape);
    y = sum(max_pool2d(x, Pool2dOptions{}));
  }
  tape.backward(y);
  CHECK(x.grad().to_doubles() == std::vector<double>{1, 0, 0, 0});
  // Average pooling with and without the padding in the divisor.
  Pool2dOptions a;
  a.kernel_h = a.kernel_w = 3;
  a.stride_h = a.stride_w = 1;
  a.pad_h = a.pad_w = 1;
  const Tensor ones = Tensor::ones({1, 2, 2, 1});
  CHECK(avg_pool2d(ones, a).to_doubles()[0] == doctest::Approx(4.0 / 9.0));
  a.count_include_pad = false;
  CHECK(avg_pool2d(ones, a).to_doubles()[0] == doctest::Approx(1.0));
  // Adaptive bins of 5 -> 3: [0,2), [1,4), [3,5).
  const Tensor row = Tensor::from_vector<float>({1, 2, 3, 4, 5}, {1, 1, 5, 1});
  CHECK(adaptive_avg_pool2d(row, 1, 3).to_doubles() == std::vector<double>{1.5, 3.0, 4.5});
  CHECK(global_avg_pool2d(row).to_doubles() == std::vector<double>{3.0});
}

TEST_CASE("dropout keeps about 1-p of the elements, scaled, and the same mask for the same key") {
  const Tensor x = Tensor::ones({100000});
  const std::vector<double> a = dropout(x, 0.25, 5, 0).to_doubles();
  int64_t kept = 0;
  for (double v : a) {
    CHECK((v == 0.0 || std::fabs(v - 1.0 / 0.75) < 1e-6));
    kept += v != 0.0;
  }
  CHECK(std::fabs(static_cast<double>(kept) / 100000.0 - 0.75) < 0.01);
  CHECK(dropout(x, 0.25, 5, 0).to_doubles() == a);
  CHECK(dropout(x, 0.25, 6, 0).to_doubles() != a);
  CHECK(dropout(x, 0.0, 5, 0).to_doubles() == x.to_doubles());
  // drop_path zeroes whole samples.
  const std::vector<double> d = drop_path(Tensor::ones({64, 4}), 0.5, 3, 0).to_doubles();
  for (int r = 0; r < 64; ++r)
    for (int j = 1; j < 4; ++j) CHECK(d[static_cast<size_t>(r * 4 + j)] == d[static_cast<size_t>(r * 4)]);
  CHECK_THROWS_AS(dropout(x, 1.0, 0, 0), Error);
}

TEST_CASE("dropout and drop_path with a seed on the device: the masks of the seed derived on the host, forward and backward") {
  const uint64_t step_seed = 123456789;
  const Tensor on_device = Tensor::from_vector<int64_t>({static_cast<int64_t>(step_seed)}, {});
  for (bool per_row : {false, true}) {
    CAPTURE(per_row);
    const auto run = [&](uint64_t seed, const Tensor& seed_from) {
      Tensor x = Tensor::uniform({16, 5}, -1, 1, 4);
      x.requires_grad_(true);
      Tape tape;
      Tensor y, loss;
      {
        Tape::Recording recording(tape);
        y = per_row ? drop_path(x, 0.4, seed, 3, seed_from) : dropout(x, 0.4, seed, 3, seed_from);
        loss = sum(mul(y, y));
      }
      tape.backward(loss);
      return std::pair{y.to_doubles(), x.grad().to_doubles()};
    };
    const auto on_host = run(derive_seed(step_seed, 7), Tensor());
    CHECK(run(7, on_device) == on_host);
    CHECK(run(8, on_device).first != on_host.first);
  }
  CHECK_THROWS_WITH_AS(dropout(Tensor::ones({4}), 0.5, 1, 0, Tensor::zeros({2}, DType::i64)),
                       doctest::Contains("dropout: the seed on the device must be one i64"), Error);
}

TEST_CASE("increment_ counts one i64 up, and refuses anything else") {
  const Tensor count = Tensor::from_vector<int64_t>({41}, {});
  increment_(count);
  increment_(count);
  CHECK(count.item() == 43.0);
  CHECK_THROWS_WITH_AS(increment_(Tensor::zeros({}, DType::f32)), doctest::Contains("increment_: needs one i64 count"),
                       Error);
}

TEST_CASE("concat_channels joins along the last axis") {
  const Tensor a = Tensor::from_vector<float>({1, 2, 3, 4}, {2, 2}), b = Tensor::from_vector<float>({5, 6}, {2, 1});
  CHECK(concat_channels({a, b}).to_doubles() == std::vector<double>{1, 2, 5, 3, 4, 6});
  CHECK_THROWS_AS(concat_channels({a, Tensor::zeros({3, 1})}), Error);
}

TEST_CASE("transpose_last2 swaps the last two axes of each batch entry") {
  const Tensor x = Tensor::from_vector<int64_t>({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, {2, 2, 3});
  const Tensor y = transpose_last2(x);
  CHECK(y.shape() == Shape{2, 3, 2});
  CHECK(y.to_doubles() == std::vector<double>{1, 4, 2, 5, 3, 6, 7, 10, 8, 11, 9, 12});
}

TEST_CASE("conv2d's gradients equal a direct double-precision computation, strided and padded as in ResNets") {
  struct Case {
    int n, h, c, o, k, stride, pad;
  };
  const Case cases[] = {{4, 4, 16, 32, 3, 2, 1}, {4, 4, 16, 32, 1, 2, 0}, {4, 8, 8, 16, 3, 2, 1},
                        {4, 8, 8, 16, 1, 2, 0},  {2, 7, 5, 6, 3, 1, 1},   {3, 9, 4, 5, 7, 2, 3},
                        {4, 4, 256, 512, 3, 2, 1}, {4, 4, 256, 512, 1, 2, 0}, {4, 2, 512, 512, 3, 1, 1},
                        {4, 16, 256, 256, 3, 1, 1}, {8, 8, 128, 128, 3, 1, 1}, {8, 16, 64, 128, 3, 2, 1}, {8, 16, 64, 128, 1, 2, 0}};
  for (const Case& k : cases) {
    INFO(k.n, "x", k.h, "x", k.h, "x", k.c, " -> ", k.o, " kernel ", k.k, " stride ", k.stride, " pad ", k.pad);
    const Tensor x = Tensor::uniform({k.n, k.h, k.h, k.c}, -1, 1, 41).requires_grad_();
    const Tensor w = Tensor::uniform({k.o, k.k, k.k, k.c}, -1, 1, 42).requires_grad_();
    Conv2dOptions options;
    options.stride_h = options.stride_w = k.stride;
    options.pad_h = options.pad_w = k.pad;
    const int oh = (k.h + 2 * k.pad - k.k) / k.stride + 1;
    const Tensor dy = Tensor::uniform({k.n, oh, oh, k.o}, -1, 1, 43);
    Tape tape;
    Tensor loss;
    {
      Tape::Recording rec(tape);
      loss = sum(mul(conv2d(x, w, Tensor(), options), dy));
    }
    tape.backward(loss);
    const std::vector<double> xv = x.to_doubles(), wv = w.to_doubles(), g = dy.to_doubles();
    std::vector<double> dx(xv.size(), 0.0), dw(wv.size(), 0.0);
    for (int n = 0; n < k.n; ++n)
      for (int oy = 0; oy < oh; ++oy)
        for (int ox = 0; ox < oh; ++ox)
          for (int o = 0; o < k.o; ++o) {
            const double d = g[((static_cast<size_t>(n) * oh + oy) * oh + ox) * k.o + o];
            for (int ky = 0; ky < k.k; ++ky)
              for (int kx = 0; kx < k.k; ++kx) {
                const int iy = oy * k.stride - k.pad + ky, ix = ox * k.stride - k.pad + kx;
                if (iy < 0 || ix < 0 || iy >= k.h || ix >= k.h) continue;
                for (int c = 0; c < k.c; ++c) {
                  const size_t xi = ((static_cast<size_t>(n) * k.h + iy) * k.h + ix) * k.c + c;
                  const size_t wi = ((static_cast<size_t>(o) * k.k + ky) * k.k + kx) * k.c + c;
                  dx[xi] += d * wv[wi];
                  dw[wi] += d * xv[xi];
                }
              }
          }
    const auto worst = [](const std::vector<double>& got, const std::vector<double>& want) {
      double difference = 0, scale = 0;
      for (size_t i = 0; i < want.size(); ++i) {
        difference = std::max(difference, std::fabs(got[i] - want[i]));
        scale = std::max(scale, std::fabs(want[i]));
      }
      return difference / scale;
    };
    CHECK(worst(x.grad().to_doubles(), dx) < 1e-5);
    CHECK(worst(w.grad().to_doubles(), dw) < 1e-5);
  }
}

TEST_CASE("batch_norm2d's training gradients equal a direct double-precision computation, with the fused add and relu") {
  struct Case {
    int n, h, c;
    BatchNormActivation activation;
  };
  const Case cases[] = {{4, 2, 64, BatchNormActivation::add_relu}, {4, 4, 32, BatchNormActivation::add_relu},
                        {4, 2, 64, BatchNormActivation::relu},     {4, 2, 64, BatchNormActivation::none},
                        {2, 3, 8, BatchNormActivation::add_relu}, {4, 2, 512, BatchNormActivation::add_relu},
                        {4, 16, 256, BatchNormActivation::relu}, {4, 8, 512, BatchNormActivation::add_relu}, {8, 32, 64, BatchNormActivation::none},
                        {8, 8, 128, BatchNormActivation::relu}};
  for (const Case& k : cases) {
    INFO(k.n, "x", k.h, "x", k.h, "x", k.c, " activation ", static_cast<int>(k.activation));
    const bool add = k.activation == BatchNormActivation::add_relu, relu = k.activation != BatchNormActivation::none;
    const Tensor x = Tensor::uniform({k.n, k.h, k.h, k.c}, -2, 3, 51).requires_grad_();
    const Tensor r = Tensor::uniform({k.n, k.h, k.h, k.c}, -1, 1, 52).requires_grad_();
    const Tensor gamma = Tensor::uniform({k.c}, 0.5, 1.5, 53).requires_grad_();
    const Tensor beta = Tensor::uniform({k.c}, -0.5, 0.5, 54).requires_grad_();
    const Tensor dy = Tensor::uniform({k.n, k.h, k.h, k.c}, -1, 1, 55);
    Tape tape;
    Tensor loss;
    {
      Tape::Recording rec(tape);
      loss = sum(mul(batch_norm2d(x, gamma, beta, Tensor::zeros({k.c}), Tensor::ones({k.c}), true, 0.1, 1e-5, k.activation,
                                  add ? r : Tensor()),
                     dy));
    }
    tape.backward(loss);
    const std::vector<double> xv = x.to_doubles(), rv = r.to_doubles(), gv = gamma.to_doubles(), bv = beta.to_doubles(),
                              g = dy.to_doubles();
    const size_t count = static_cast<size_t>(k.n) * k.h * k.h, c = static_cast<size_t>(k.c);
    std::vector<double> dx(xv.size()), dr(xv.size(), 0.0), dgamma(c, 0.0), dbeta(c, 0.0);
    for (size_t ch = 0; ch < c; ++ch) {
      double mean = 0, var = 0;
      for (size_t p = 0; p < count; ++p) mean += xv[p * c + ch] / static_cast<double>(count);
      for (size_t p = 0; p < count; ++p) var += (xv[p * c + ch] - mean) * (xv[p * c + ch] - mean) / static_cast<double>(count);
      const double inv_std = 1.0 / std::sqrt(var + 1e-5);
      std::vector<double> dz(count), xhat(count);
      double mean_dz = 0, mean_dz_xhat = 0;
      for (size_t p = 0; p < count; ++p) {
        const size_t i = p * c + ch;
        xhat[p] = (xv[i] - mean) * inv_std;
        const double z = gv[ch] * xhat[p] + bv[ch] + (add ? rv[i] : 0.0);
        dz[p] = relu && z <= 0 ? 0.0 : g[i];
        dr[i] = dz[p];
        dgamma[ch] += dz[p] * xhat[p];
        dbeta[ch] += dz[p];
        mean_dz += dz[p] * gv[ch] / static_cast<double>(count);
        mean_dz_xhat += dz[p] * gv[ch] * xhat[p] / static_cast<double>(count);
      }
      for (size_t p = 0; p < count; ++p) dx[p * c + ch] = inv_std * (dz[p] * gv[ch] - mean_dz - xhat[p] * mean_dz_xhat);
    }
    const auto worst = [](const std::vector<double>& got, const std::vector<double>& want) {
      double difference = 0, scale = 1e-30;
      for (size_t i = 0; i < want.size(); ++i) {
        difference = std::max(difference, std::fabs(got[i] - want[i]));
        scale = std::max(scale, std::fabs(want[i]));
      }
      return difference / scale;
    };
    CHECK(worst(x.grad().to_doubles(), dx) < 1e-5);
    CHECK(worst(gamma.grad().to_doubles(), dgamma) < 1e-5);
    CHECK(worst(beta.grad().to_doubles(), dbeta) < 1e-5);
    if (add) CHECK(worst(r.grad().to_doubles(), dr) < 1e-5);
  }
}

TEST_CASE("batch_norm2d's CPU statistics do not drift with the number of rows (sums in double)") {
  // 20,000,000 rows of 1.5 in one channel: a float running sum stops growing at 2^25 (adding 1.5
  // rounds away), so the mean came out as 33554432 / 20000000 = 1.68 instead of 1.5, and the
  // backward's sums lost precision the same way (the weights after a step differed from PyTorch's
  // by up to 4% of the update in the layers below).
  const Tensor x = Tensor::full({20, 1000, 1000, 1}, 1.5);
  const Tensor running_mean = Tensor::zeros({1}), running_var = Tensor::ones({1});
  const Tensor y = batch_norm2d(x, Tensor(), Tensor(), running_mean, running_var, true, 1.0);
  CHECK(running_mean.to_doubles()[0] == doctest::Approx(1.5).epsilon(1e-7));
  CHECK(running_var.to_doubles()[0] == doctest::Approx(0.0).epsilon(1e-7));
}

TEST_CASE("batch_norm2d's one-pass CPU statistics keep the variance of a small spread around a large mean") {
  // One pass sums x - shift and its square, the first row as the shift. Here the means are 1e6 and
  // more with a spread of about 1, and the first row sits 50 away from the mean: without the shift
  // the sum of squares (about 1e17 over the rows) would leave the variance of 0.5 to its last bits
  // and the rounding of 1e5 additions (checked: up to 1.6% off); with it the variance must match a two-pass
  // sum over the same float values.
  const int64_t rows = 100003, channels = 3;
  std::vector<float> values(static_cast<size_t>(rows * channels));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < channels; ++c)
      values[static_cast<size_t>(r * channels + c)] =
          static_cast<float>(1e6 * static_cast<double>(c + 1) + std::sin(0.37 * static_cast<double>(r) + c));
  for (int64_t c = 0; c < channels; ++c) values[static_cast<size_t>(c)] = static_cast<float>(1e6 * static_cast<double>(c + 1) + 50.0);
  const Tensor x = Tensor::from_vector(values, {1, rows, 1, channels});
  const Tensor running_mean = Tensor::zeros({channels}), running_var = Tensor::ones({channels});
  batch_norm2d(x, Tensor(), Tensor(), running_mean, running_var, true, 1.0);
  const std::vector<double> mean = running_mean.to_doubles(), var = running_var.to_doubles();
  for (int64_t c = 0; c < channels; ++c) {
    double sum = 0, squares = 0;
    for (int64_t r = 0; r < rows; ++r) sum += values[static_cast<size_t>(r * channels + c)];
    const double exact_mean = sum / static_cast<double>(rows);
    for (int64_t r = 0; r < rows; ++r) {
      const double d = values[static_cast<size_t>(r * channels + c)] - exact_mean;
      squares += d * d;
    }
    const double unbiased = squares / static_cast<double>(rows - 1);  // the running variance is unbiased
    INFO("channel " << c);
    CHECK(mean[static_cast<size_t>(c)] == doctest::Approx(exact_mean).epsilon(1e-7));
    CHECK(var[static_cast<size_t>(c)] == doctest::Approx(unbiased).epsilon(1e-5));
  }
}
