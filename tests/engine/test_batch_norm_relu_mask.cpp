// The CPU BatchNorm backward can take the relu mask from x instead of the saved output y
// (kernels/batch_norm.h): the sums and input gradients must be the same bits as with y, in f32 and
// f64, training and eval, with and without weight and bias, including elements whose
// pre-activation is exactly zero; the cases that need y refuse to run without it.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "engine/cnn.h"
#include "kernels/batch_norm.h"

using namespace cnn;
namespace k = cnn::kernels;

namespace {

template <class T>
std::vector<T> random_values(size_t count, uint32_t seed, double low, double high) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(low, high);
  std::vector<T> v(count);
  for (T& x : v) x = static_cast<T>(u(rng));
  return v;
}

template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

template <class T>
void check_mask_from_input(DType dt, bool affine) {
  const int64_t m = 1500, c = 19;
  std::vector<T> x = random_values<T>(static_cast<size_t>(m * c), 1, -2, 3);
  const std::vector<T> dy = random_values<T>(static_cast<size_t>(m * c), 2, -1, 1);
  std::vector<T> weight = random_values<T>(c, 3, -1.5, 1.5), bias = random_values<T>(c, 4, -0.5, 0.5);
  // Channel 0: weight 0 and bias 0, so every pre-activation is exactly zero (all masked).
  weight[0] = 0;
  bias[0] = 0;
  std::vector<T> mean(c), var(c), invstd(c);
  k::cpu::batch_norm_stats(dt, x.data(), m, c, mean.data(), var.data());
  k::cpu::batch_norm_update_stats(dt, nullptr, var.data(), c, m, nullptr, 0.0, 1e-5, invstd.data(), nullptr, nullptr);
  // Channel 1 without a bias: elements equal to the mean normalise to exactly zero.
  if (affine) bias[1] = 0;
  for (int64_t r = 0; r < m; r += 7) x[static_cast<size_t>(r * c + 1)] = mean[1];
  const void* w = affine ? weight.data() : nullptr;
  const void* b = affine ? bias.data() : nullptr;

  std::vector<T> y(static_cast<size_t>(m * c));
  k::cpu::batch_norm_forward(dt, x.data(), m, c, mean.data(), invstd.data(), w, b, nullptr, BatchNormActivation::relu,
                             y.data());
  size_t zeros = 0;
  for (T v : y) zeros += v == T(0);
  CHECK(zeros > static_cast<size_t>(m) / 2);  // the mask matters

  std::vector<T> s1_y(c), s2_y(c), s1_x(c), s2_x(c);
  k::cpu::batch_norm_backward_reduce(dt, dy.data(), y.data(), x.data(), m, c, mean.data(), invstd.data(), w, b,
                                     BatchNormActivation::relu, s1_y.data(), s2_y.data());
  k::cpu::batch_norm_backward_reduce(dt, dy.data(), nullptr, x.data(), m, c, mean.data(), invstd.data(), w, b,
                                     BatchNormActivation::relu, s1_x.data(), s2_x.data());
  CHECK(same_bits(s1_y, s1_x));
  CHECK(same_bits(s2_y, s2_x));
  if (affine) CHECK(s1_x[0] == T(0));  // channel 0 all masked
  for (bool training : {true, false}) {
    CAPTURE(training);
    std::vector<T> dx_y(static_cast<size_t>(m * c)), dx_x(static_cast<size_t>(m * c));
    k::cpu::batch_norm_backward_input(dt, dy.data(), y.data(), x.data(), m, c, mean.data(), invstd.data(), w, b,
                                      s1_y.data(), s2_y.data(), training, BatchNormActivation::relu, dx_y.data(),
                                      nullptr);
    k::cpu::batch_norm_backward_input(dt, dy.data(), nullptr, x.data(), m, c, mean.data(), invstd.data(), w, b,
                                      s1_x.data(), s2_x.data(), training, BatchNormActivation::relu, dx_x.data(),
                                      nullptr);
    CHECK(same_bits(dx_y, dx_x));
  }
}

}  // namespace

TEST_CASE("CPU BatchNorm backward: the relu mask from x gives the same bits as the mask from y") {
  for (bool affine : {true, false}) {
    CAPTURE(affine);
    check_mask_from_input<float>(DType::f32, affine);
    check_mask_from_input<double>(DType::f64, affine);
  }
}

TEST_CASE("CPU BatchNorm backward: the cases whose mask needs y refuse to run without it") {
  const int64_t m = 4, c = 2;
  std::vector<float> x(m * c, 1.f), dy(m * c, 1.f), stats(c, 1.f), sums(2 * c);
  CHECK_FALSE(k::cpu::batch_norm_mask_from_input(DType::f32, BatchNormActivation::add_relu));
  CHECK_FALSE(k::cpu::batch_norm_mask_from_input(DType::f16, BatchNormActivation::relu));
  CHECK(k::cpu::batch_norm_mask_from_input(DType::f32, BatchNormActivation::relu));
  CHECK_THROWS_WITH_AS(k::cpu::batch_norm_backward_reduce(DType::f32, dy.data(), nullptr, x.data(), m, c, stats.data(),
                                                          stats.data(), nullptr, nullptr, BatchNormActivation::add_relu,
                                                          sums.data(), sums.data() + c),
                       doctest::Contains("needs the forward's output y"), Error);
  std::vector<uint16_t> halves(m * c, 0x3c00);  // 1.0 in f16
  CHECK_THROWS_WITH_AS(k::cpu::batch_norm_backward_input(DType::f16, halves.data(), nullptr, halves.data(), m, c,
                                                         stats.data(), stats.data(), nullptr, nullptr, sums.data(),
                                                         sums.data() + c, true, BatchNormActivation::relu,
                                                         halves.data(), nullptr),
                       doctest::Contains("relu mask of f16"), Error);
}

// The mask from x relies on the backward computing z = xhat * weight + bias to the forward's bits.
// GCC contracts a * b + c into a fused multiply-add in C++ by default (ISO mode too) wherever the
// instruction set has one, so both must contract it alike. These pre-activations sit where the two
// roundings part: xhat * weight = 1 + 2^-11 + 2^-24 exactly (f32; 1 + 2^-26 + 2^-54 in f64), so with
// bias -(1 + 2^-11) z is 0 with the product rounded and 2^-24 fused, and the relu's mask flips
// between them. Forward and backward must agree on every element, in whole vectors and the tail.
template <class T>
void check_mask_where_contraction_matters(DType dt, int bits) {
  const int64_t m = 8, c = 19;
  const T e = std::ldexp(T(1), -bits);
  const std::vector<T> x(static_cast<size_t>(m * c), 1 + e), weight(c, 1 + e), bias(c, -(1 + 2 * e));
  const std::vector<T> mean(c, 0), invstd(c, 1), dy(static_cast<size_t>(m * c), 1);
  std::vector<T> y(static_cast<size_t>(m * c), -1);
  k::cpu::batch_norm_forward(dt, x.data(), m, c, mean.data(), invstd.data(), weight.data(), bias.data(), nullptr,
                             BatchNormActivation::relu, y.data());
  std::vector<T> s1_y(c), s2_y(c), s1_x(c), s2_x(c);
  k::cpu::batch_norm_backward_reduce(dt, dy.data(), y.data(), x.data(), m, c, mean.data(), invstd.data(),
                                     weight.data(), bias.data(), BatchNormActivation::relu, s1_y.data(), s2_y.data());
  k::cpu::batch_norm_backward_reduce(dt, dy.data(), nullptr, x.data(), m, c, mean.data(), invstd.data(),
                                     weight.data(), bias.data(), BatchNormActivation::relu, s1_x.data(), s2_x.data());
  CHECK(same_bits(s1_y, s1_x));
  CHECK(same_bits(s2_y, s2_x));
  std::vector<T> dx_y(static_cast<size_t>(m * c)), dx_x(static_cast<size_t>(m * c));
  k::cpu::batch_norm_backward_input(dt, dy.data(), y.data(), x.data(), m, c, mean.data(), invstd.data(),
                                    weight.data(), bias.data(), s1_y.data(), s2_y.data(), false,
                                    BatchNormActivation::relu, dx_y.data(), nullptr);
  k::cpu::batch_norm_backward_input(dt, dy.data(), nullptr, x.data(), m, c, mean.data(), invstd.data(),
                                    weight.data(), bias.data(), s1_x.data(), s2_x.data(), false,
                                    BatchNormActivation::relu, dx_x.data(), nullptr);
  CHECK(same_bits(dx_y, dx_x));
}

TEST_CASE("CPU BatchNorm backward: the mask from x agrees with y where a fused multiply-add would flip it") {
  check_mask_where_contraction_matters<float>(DType::f32, 12);
  check_mask_where_contraction_matters<double>(DType::f64, 27);
}
