// Batch augmentation on tensors (the CPU path of the GPU augmentation; the kernels themselves are
// compared with their CPU reference under emulation in tests/kernels): crop/flip/normalise from u8
// batches, the MixUp/CutMix draws, and soft targets that cross_entropy_soft accepts.
#include <doctest/doctest.h>

#include <cmath>

#include "data/batch_augment.h"
#include "engine/ops.h"
#include "fixtures.h"

using namespace cnn;
using namespace cnn::data;
using namespace cnn::data::test;

TEST_CASE("crop_flip_normalize on a u8 batch: centred windows equal CenterCrop + Normalize") {
  const Image a = pattern_image(10, 12, 3, 1), b = pattern_image(10, 12, 3, 2);
  Tensor batch = Tensor::empty({2, 10, 12, 3}, DType::u8);
  std::copy(a.pixels.begin(), a.pixels.end(), batch.data_as<uint8_t>());
  std::copy(b.pixels.begin(), b.pixels.end(), batch.data_as<uint8_t>() + a.pixels.size());
  CropFlipOptions o;
  o.height = 6, o.width = 8, o.random_crop = false, o.flip_probability = 0;
  const Tensor out = crop_flip_normalize(batch, o, Normalize::imagenet(), DType::f32, 1, 0, 0);
  CHECK(out.shape() == Shape{2, 6, 8, 3});
  const Pipeline reference({std::make_shared<CenterCrop>(6, 8)}, 6, 8, 3, Normalize::imagenet());
  std::vector<float> expected(6 * 8 * 3);
  write_sample(reference.run(b, 0, 0, 0, "b"), reference.normalize(), DType::f32, expected.data());
  const float* got = out.data_as<float>() + expected.size();
  for (size_t i = 0; i < expected.size(); ++i) REQUIRE(got[i] == expected[i]);
  o.height = 11;
  CHECK(error_message([&] { crop_flip_normalize(batch, o, Normalize::imagenet(), DType::f32, 1, 0, 0); })
            .find("does not fit") != std::string::npos);
}

TEST_CASE("Beta draws have the right mean and variance") {
  for (double alpha : {0.4, 0.8, 2.0}) {
    double sum = 0, sum_sq = 0;
    const int draws = 4000;
    for (int i = 0; i < draws; ++i) {
      SampleRng rng(7, 0, static_cast<uint64_t>(i), RngPurpose::mix);
      const double x = sample_beta(alpha, rng);
      REQUIRE(x >= 0.0);
      REQUIRE(x <= 1.0);
      sum += x;
      sum_sq += x * x;
    }
    const double mean = sum / draws, var = sum_sq / draws - mean * mean;
    CHECK(mean == doctest::Approx(0.5).epsilon(0.04));
    CHECK(var == doctest::Approx(1.0 / (4.0 * (2.0 * alpha + 1.0))).epsilon(0.1));
  }
}

// Beta(a, a) for a tiny alpha is nearly a fair coin on {0, 1}. Both Gamma draws used to underflow
// to 0 there, giving 0/0 = NaN: MixUp's loss became NaN, and CutMix cast the NaN to int (undefined
// behaviour) and inverted its box.
TEST_CASE("Beta draws and the MixUp/CutMix draw stay finite and in range for a tiny alpha") {
  for (double alpha : {1e-3, 1e-5, 1e-300}) {
    CAPTURE(alpha);
    int near_zero = 0, near_one = 0;
    const int draws = 2000;
    for (int i = 0; i < draws; ++i) {
      SampleRng rng(11, 0, static_cast<uint64_t>(i), RngPurpose::mix);
      const double x = sample_beta(alpha, rng);
      REQUIRE(x >= 0.0);
      REQUIRE(x <= 1.0);
      near_zero += x < 0.01;
      near_one += x > 0.99;
    }
    CHECK(near_zero + near_one > draws * 0.95);
    CHECK(near_zero == doctest::Approx(draws / 2).epsilon(0.1));
  }
  for (const bool cutmix : {false, true}) {
    MixOptions o;
    o.mixup_alpha = cutmix ? 0 : 1e-5;
    o.cutmix_alpha = cutmix ? 1e-5 : 0;
    for (uint64_t step = 0; step < 200; ++step) {
      const MixResult r = draw_mix(o, 16, 16, 3, 0, step);
      REQUIRE(r.lam >= 0.0);
      REQUIRE(r.lam <= 1.0);
      REQUIRE(r.box.y0 <= r.box.y1);
      REQUIRE(r.box.x0 <= r.box.x1);
    }
  }
}

TEST_CASE("MixUp: images and soft targets mixed with the reversed batch") {
  const int64_t n = 3, classes = 4;
  Tensor images = Tensor::uniform({n, 2, 2, 3}, -1, 1, 5);
  const Tensor original = images.clone();
  const Tensor labels = Tensor::from_vector<int64_t>({0, 1, 3}, {n});
  MixOptions o;
  o.cutmix_alpha = 0;
  o.label_smoothing = 0;
  const MixResult r = mix_batch(images, labels, classes, o, 3, 1, 7);
  CHECK_FALSE(r.cutmix);
  CHECK(r.lam > 0.0);
  CHECK(r.lam < 1.0);
  const float lam = static_cast<float>(r.lam);
  const float* x = original.data_as<float>();
  const float* y = images.data_as<float>();
  CHECK(y[0] == doctest::Approx(lam * x[0] + (1 - lam) * x[24]));
  CHECK(y[13] == doctest::Approx(x[13]));  // the middle sample pairs with itself
  const float* t = r.targets.data_as<float>();
  CHECK(t[0] == doctest::Approx(lam));       // sample 0: label 0, paired with label 3
  CHECK(t[3] == doctest::Approx(1 - lam));
  CHECK(t[5] == doctest::Approx(1.0));       // sample 1 pairs with itself
  const Tensor loss = cross_entropy_soft(Tensor::zeros({n, classes}), r.targets);
  CHECK(loss.item() == doctest::Approx(std::log(4.0)));
  // The same (seed, epoch, step) draws the same lam; another step another.
  CHECK(draw_mix(o, 2, 2, 3, 1, 7).lam == r.lam);
  CHECK(draw_mix(o, 2, 2, 3, 1, 8).lam != r.lam);
}

TEST_CASE("CutMix: the box comes from the other sample and lam is the area kept") {
  const int64_t n = 2, classes = 2;
  Tensor images = Tensor::empty({n, 16, 16, 1}, DType::u8);
  std::fill_n(images.data_as<uint8_t>(), 256, uint8_t{10});
  std::fill_n(images.data_as<uint8_t>() + 256, 256, uint8_t{200});
  const Tensor labels = Tensor::from_vector<int64_t>({0, 1}, {n});
  MixOptions o;
  o.mixup_alpha = 0;
  o.label_smoothing = 0.2;
  MixResult r;
  uint64_t step = 0;
  do r = mix_batch(images, labels, classes, o, 1, 0, step++);  // find a draw with a non-empty box
  while (r.lam == 1.0);
  REQUIRE(r.cutmix);
  int from_other = 0;
  for (int i = 0; i < 256; ++i) from_other += images.data_as<uint8_t>()[i] == 200;
  CHECK(from_other == (r.box.y1 - r.box.y0) * (r.box.x1 - r.box.x0));
  CHECK(r.lam == doctest::Approx(1.0 - from_other / 256.0));
  const float* t = r.targets.data_as<float>();
  CHECK(t[0] + t[1] == doctest::Approx(1.0));
  CHECK(t[0] == doctest::Approx(r.lam * 0.9 + (1 - r.lam) * 0.1));
  o.probability = 0;
  CHECK(draw_mix(o, 16, 16, 1, 0, 0).lam == 1.0);
}
