// The batch augmentation kernels (kernels/cuda/augment.cu) under host emulation against the CPU
// reference (kernels/cpu/augment.cpp): per-sample crops, flips and normalisation into every output
// dtype, MixUp and CutMix in place, and the soft targets. The emulated kernels must give the same
// bits as the reference: both draw with SampleRng and share the element functions. Outputs start
// as NaN (or 0xCD bytes), so a forgotten element fails the comparison.
#include <doctest/doctest.h>

#include <cstring>
#include <limits>
#include <vector>

#include "kernels/augment.h"
#include "kernels/elementwise.h"

using namespace cnn;
namespace cpu = cnn::kernels::cpu;
namespace emu = cnn::kernels::cuda;

namespace {
std::vector<uint8_t> random_bytes(size_t n, uint64_t seed) {
  std::vector<uint8_t> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<uint8_t>(philox4x32_10(seed, i, 0).v[0]);
  return out;
}

std::vector<uint8_t> poisoned(DType dt, int64_t n) {
  std::vector<uint8_t> out(static_cast<size_t>(n * dtype_size(dt)), 0xCD);
  if (is_floating(dt)) cpu::fill(dt, out.data(), n, std::numeric_limits<double>::quiet_NaN());
  return out;
}

std::vector<uint8_t> random_values(DType dt, int64_t n, uint64_t seed) {
  std::vector<uint8_t> out(static_cast<size_t>(n * dtype_size(dt)));
  cpu::random_fill(dt, out.data(), n, RandomKind::uniform, seed, 1, -2.0, 2.0);
  return out;
}

NormalizeParams imagenet_norm() {
  NormalizeParams p;
  const float mean[3] = {0.485f, 0.456f, 0.406f}, stdev[3] = {0.229f, 0.224f, 0.225f};
  for (int c = 0; c < 3; ++c) {
    p.mean[c] = 255.0f * mean[c];
    p.inv_std[c] = 1.0f / (255.0f * stdev[c]);
  }
  return p;
}
}  // namespace

TEST_CASE("crop_flip_normalize: random and centred windows, padding, every output dtype") {
  const int64_t n = 4;
  for (DType dt : {DType::f32, DType::f16, DType::bf16, DType::u8}) {
    for (bool random_crop : {true, false}) {
      CropFlipParams p;
      p.in_h = 20, p.in_w = 18, p.channels = 3, p.out_h = 16, p.out_w = 14, p.padding = 3;
      p.random_crop = random_crop;
      p.flip_probability = random_crop ? 0.5f : 0.0f;
      p.seed = 11, p.epoch = 2, p.first_sample = 40;
      const auto in = random_bytes(static_cast<size_t>(n * p.in_h * p.in_w * p.channels), 5);
      const int64_t count = n * p.out_h * p.out_w * p.channels;  // 2688: several grid-stride rounds
      auto want = poisoned(dt, count), got = poisoned(dt, count);
      cpu::crop_flip_normalize(in.data(), n, p, imagenet_norm(), dt, want.data());
      emu::crop_flip_normalize(in.data(), n, p, imagenet_norm(), dt, got.data(), nullptr);
      INFO(dtype_name(dt) << (random_crop ? " random" : " centred"));
      CHECK(std::memcmp(got.data(), want.data(), want.size()) == 0);
      if (is_floating(dt)) {
        std::vector<double> values(static_cast<size_t>(count));
        cpu::cast(dt, want.data(), DType::f64, values.data(), count);
        for (double v : values) REQUIRE(v == v);  // the reference wrote everything
      }
    }
  }
}

TEST_CASE("mixup pairs samples n and N-1-n in place, the middle sample of an odd batch is kept") {
  for (DType dt : {DType::f32, DType::f64, DType::f16, DType::bf16}) {
    for (int64_t n : {5, 6}) {
      const int64_t per = 300;
      auto want = random_values(dt, n * per, 3), got = want;
      const auto original = want;
      cpu::mixup(dt, want.data(), n, per, 0.3f);
      emu::mixup(dt, got.data(), n, per, 0.3f, nullptr);
      INFO(dtype_name(dt) << " n=" << n);
      CHECK(std::memcmp(got.data(), want.data(), want.size()) == 0);
      std::vector<double> before(static_cast<size_t>(n * per)), after(before.size());
      cpu::cast(dt, original.data(), DType::f64, before.data(), n * per);
      cpu::cast(dt, want.data(), DType::f64, after.data(), n * per);
      const double expected = 0.3 * before[0] + 0.7 * before[static_cast<size_t>((n - 1) * per)];
      CHECK(after[0] == doctest::Approx(expected).epsilon(dt == DType::bf16 ? 1e-2 : 1e-3));
      if (n % 2 == 1) CHECK(after[static_cast<size_t>(n / 2 * per + 7)] == before[static_cast<size_t>(n / 2 * per + 7)]);
    }
  }
}

TEST_CASE("cutmix swaps the box between paired samples, for any element size") {
  const int h = 9, w = 11, c = 3;
  const CutBox box{2, 7, 3, 10};
  for (DType dt : {DType::u8, DType::f16, DType::f32, DType::f64}) {
    const int64_t n = 5, count = n * h * w * c;
    std::vector<uint8_t> want = random_bytes(static_cast<size_t>(count * dtype_size(dt)), 8), got = want;
    const auto original = want;
    cpu::cutmix(dt, want.data(), n, h, w, c, box);
    emu::cutmix(dt, got.data(), n, h, w, c, box, nullptr);
    INFO(dtype_name(dt));
    CHECK(std::memcmp(got.data(), want.data(), want.size()) == 0);
    const size_t e = static_cast<size_t>(dtype_size(dt)), sample = static_cast<size_t>(h * w * c) * e;
    const size_t inside = (static_cast<size_t>(3 * w + 5) * c + 1) * e, outside = (static_cast<size_t>(1 * w + 5) * c) * e;
    CHECK(std::memcmp(&want[inside], &original[4 * sample + inside], e) == 0);      // sample 0 took sample 4's box
    CHECK(std::memcmp(&want[4 * sample + inside], &original[inside], e) == 0);      // and gave it its own
    CHECK(std::memcmp(&want[outside], &original[outside], e) == 0);                 // outside the box: unchanged
    CHECK(std::memcmp(&want[2 * sample], &original[2 * sample], sample) == 0);      // the middle sample: unchanged
  }
}

TEST_CASE("mix_targets: smoothed one-hot targets mixed with the paired sample's") {
  const int64_t n = 6, k = 130;  // 780 elements: more than one grid-stride round
  const std::vector<int64_t> labels = {3, 0, 129, 3, 0, 5};
  std::vector<float> want(static_cast<size_t>(n * k), std::numeric_limits<float>::quiet_NaN()), got = want;
  cpu::mix_targets(labels.data(), n, k, 0.25f, 0.1f, want.data());
  emu::mix_targets(labels.data(), n, k, 0.25f, 0.1f, got.data(), nullptr);
  CHECK(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)) == 0);
  const float off = 0.1f / k, on = 0.9f + off;
  CHECK(want[3] == doctest::Approx(0.25f * on + 0.75f * off));       // sample 0: label 3, paired with label 5
  CHECK(want[5] == doctest::Approx(0.25f * off + 0.75f * on));
  CHECK(want[static_cast<size_t>(1 * k + 0)] == doctest::Approx(on));  // samples 1 and 4 share label 0
  double row = 0;
  for (int64_t j = 0; j < k; ++j) row += want[static_cast<size_t>(j)];
  CHECK(row == doctest::Approx(1.0));
}
