// Batch augmentation: argument checks, the host-side draws of MixUp/CutMix, and dispatch to the
// CPU or CUDA kernels of kernels/augment.h by the tensors' device.
#include "data/batch_augment.h"

#include <algorithm>
#include <cmath>

#include "engine/backend.h"

namespace cnn::data {

namespace {
// A Gamma(a, 1) draw for a >= 1 (Marsaglia and Tsang's method).
double sample_gamma_at_least_one(double a, SampleRng& rng) {
  const double d = a - 1.0 / 3.0, c = 1.0 / std::sqrt(9.0 * d);
  for (;;) {
    // A standard normal by Box-Muller; 1 - uniform() is in (0, 1], so the log is finite.
    const double x = std::sqrt(-2.0 * std::log(1.0 - rng.uniform())) * std::cos(6.283185307179586 * rng.uniform());
    const double v = std::pow(1.0 + c * x, 3);
    if (v <= 0) continue;
    const double u = 1.0 - rng.uniform();
    if (std::log(u) < 0.5 * x * x + d - d * v + d * std::log(v)) return d * v;
  }
}

// A Gamma(a, 1) draw kept as its two factors, g * u^(1/a) (u = 1 for a >= 1; for a < 1, g is a
// Gamma(a + 1) draw and u uniform in (0, 1]), so that its logarithm stays finite when u^(1/a)
// underflows to 0, as it does for a tiny a.
struct GammaDraw {
  double g, u = 1.0;
};

GammaDraw draw_gamma(double a, SampleRng& rng) {
  if (a >= 1.0) return {sample_gamma_at_least_one(a, rng)};
  const double g = sample_gamma_at_least_one(a + 1.0, rng);
  return {g, 1.0 - rng.uniform()};
}
}  // namespace

double sample_beta(double a, SampleRng& rng) {
  const GammaDraw x = draw_gamma(a, rng), y = draw_gamma(a, rng);
  const double gx = x.g * std::pow(x.u, 1.0 / a), gy = y.g * std::pow(y.u, 1.0 / a);
  if (gx + gy > 0 && std::isfinite(gx + gy)) return gx / (gx + gy);
  // Both draws underflowed (alpha near 0, where Beta(a, a) is nearly a fair coin on {0, 1}):
  // x / (x + y) = 1 / (1 + exp(ln y - ln x)), with the difference of logs formed factor by factor.
  const double log_ratio = std::log(y.g / x.g) + (std::log(y.u) - std::log(x.u)) / a;
  return 1.0 / (1.0 + std::exp(log_ratio));
}

Tensor crop_flip_normalize(const Tensor& images, const CropFlipOptions& o, const Normalize& normalize, DType dtype,
                           uint64_t seed, uint64_t epoch, uint64_t first_sample) {
  CNN_CHECK(images.dtype() == DType::u8 && images.dim() == 4, "crop_flip_normalize: images must be u8 [N, H, W, C], not ",
            describe(images));
  CropFlipParams p;
  p.in_h = static_cast<int>(images.size(1)), p.in_w = static_cast<int>(images.size(2));
  p.channels = static_cast<int>(images.size(3));
  p.out_h = o.height, p.out_w = o.width, p.padding = o.padding;
  p.random_crop = o.random_crop;
  p.flip_probability = static_cast<float>(o.flip_probability);
  p.seed = seed, p.epoch = epoch, p.first_sample = first_sample;
  CNN_CHECK(o.height > 0 && o.width > 0 && o.padding >= 0 && p.in_h + 2 * o.padding >= o.height &&
                p.in_w + 2 * o.padding >= o.width,
            "crop_flip_normalize: a ", o.height, "x", o.width, " window does not fit in ", describe(images),
            " padded by ", o.padding);
  const NormalizeParams norm = normalize.params(p.channels);
  Tensor out = Tensor::empty({images.size(0), o.height, o.width, p.channels}, dtype, images.device());
  const auto* in = static_cast<const uint8_t*>(images.data());
  CNN_KERNEL(images.device(), crop_flip_normalize, in, images.size(0), p, norm, dtype, out.data());
  return out;
}

MixResult draw_mix(const MixOptions& o, int height, int width, uint64_t seed, uint64_t epoch, uint64_t step) {
  CNN_CHECK(o.mixup_alpha >= 0 && o.cutmix_alpha >= 0, "MixUp/CutMix alphas must not be negative");
  CNN_CHECK(o.label_smoothing >= 0 && o.label_smoothing < 1, "label smoothing ", o.label_smoothing,
            " must be in [0, 1)");
  SampleRng rng(seed, epoch, step, RngPurpose::mix);
  MixResult r;
  const bool enabled = o.mixup_alpha > 0 || o.cutmix_alpha > 0;
  if (!enabled || !rng.bernoulli(o.probability)) return r;
  r.cutmix = o.cutmix_alpha > 0 && (o.mixup_alpha == 0 || rng.bernoulli(o.switch_probability));
  if (!r.cutmix) {
    r.lam = sample_beta(o.mixup_alpha, rng);
    return r;
  }
  const double lam = sample_beta(o.cutmix_alpha, rng);
  const double cut = std::sqrt(1.0 - lam);
  const int cut_h = static_cast<int>(height * cut), cut_w = static_cast<int>(width * cut);
  const int cy = static_cast<int>(rng.integer(0, height - 1)), cx = static_cast<int>(rng.integer(0, width - 1));
  r.box.y0 = std::clamp(cy - cut_h / 2, 0, height);
  r.box.y1 = std::clamp(cy + cut_h / 2, 0, height);
  r.box.x0 = std::clamp(cx - cut_w / 2, 0, width);
  r.box.x1 = std::clamp(cx + cut_w / 2, 0, width);
  // The weight of the own label is the area that stayed, after clipping the box to the image.
  r.lam = 1.0 - static_cast<double>(r.box.y1 - r.box.y0) * (r.box.x1 - r.box.x0) / (static_cast<double>(height) * width);
  return r;
}

MixResult mix_batch(Tensor& images, const Tensor& labels, int64_t classes, const MixOptions& o, uint64_t seed,
                    uint64_t epoch, uint64_t step) {
  CNN_CHECK(images.dim() == 4, "mix_batch: images must be [N, H, W, C], not ", describe(images));
  CNN_CHECK(labels.dtype() == DType::i64 && labels.dim() == 1 && labels.size(0) == images.size(0) &&
                labels.device() == images.device(),
            "mix_batch: labels must be i64 [", images.size(0), "] on the images' device, not ", describe(labels));
  CNN_CHECK(classes > 0, "mix_batch: classes must be positive");
  const int h = static_cast<int>(images.size(1)), w = static_cast<int>(images.size(2)), c = static_cast<int>(images.size(3));
  MixResult r = draw_mix(o, h, w, seed, epoch, step);
  const int64_t n = images.size(0);
  r.targets = Tensor::empty({n, classes}, DType::f32, images.device());
  const float lam = static_cast<float>(r.lam), smoothing = static_cast<float>(o.label_smoothing);
  const auto* y = static_cast<const int64_t*>(labels.data());
  auto* t = static_cast<float*>(r.targets.data());
  const bool mixup = !r.cutmix && r.lam < 1.0;
  CNN_CHECK(!mixup || is_floating(images.dtype()), "mix_batch: MixUp needs floating images, not ", describe(images),
            "; normalise first");
  const Device device = images.device();
  if (r.cutmix) CNN_KERNEL(device, cutmix, images.dtype(), images.data(), n, h, w, c, r.box);
  if (mixup) CNN_KERNEL(device, mixup, images.dtype(), images.data(), n, images.numel() / std::max<int64_t>(n, 1), lam);
  CNN_KERNEL(device, mix_targets, y, n, classes, lam, smoothing, t);
  return r;
}

}  // namespace cnn::data
