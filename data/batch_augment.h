// Augmentation of whole batches where they live (CPU or CUDA tensors), for loaders that deliver raw
// u8 batches (LoaderOptions::dtype = u8) and leave the per-pixel work to the GPU:
//   - crop_flip_normalize: per-sample random (or centred) crop of the zero-padded image, horizontal
//     flip and normalisation into the compute dtype;
//   - mix_batch: MixUp or CutMix (timm's recipe: one draw per batch, samples paired with the
//     reversed batch) producing the soft targets cross_entropy_soft takes.
// Random draws are keyed by (seed, epoch, sample) and (seed, epoch, step): reproducible and
// resumable, identical on both backends (the kernels are in kernels/augment.h).
#pragma once
#include <cstdint>

#include "data/transforms.h"
#include "engine/tensor.h"
#include "kernels/augment.h"

namespace cnn::data {

struct CropFlipOptions {
  int height = 224, width = 224;  // output window
  int padding = 0;                // zeros around the input before cropping
  bool random_crop = true;        // false: centred windows
  double flip_probability = 0.5;
};

// images: u8 [N, H, W, C] -> dtype [N, height, width, C] on the same device. Sample n draws with
// key (seed, epoch, first_sample + n), where first_sample is typically step * batch_size.
Tensor crop_flip_normalize(const Tensor& images, const CropFlipOptions& options, const Normalize& normalize,
                           DType dtype, uint64_t seed, uint64_t epoch, uint64_t first_sample);

struct MixOptions {
  double mixup_alpha = 0.8;   // Beta(alpha, alpha) for MixUp's weight; 0 disables MixUp
  double cutmix_alpha = 1.0;  // Beta(alpha, alpha) for CutMix's area; 0 disables CutMix
  double switch_probability = 0.5;  // with both enabled: chance of CutMix instead of MixUp
  double probability = 1.0;         // chance that a batch is mixed at all
  double label_smoothing = 0.1;
};

struct MixResult {
  Tensor targets;      // f32 [N, classes] on the images' device
  double lam = 1.0;    // weight of each sample's own label (CutMix: the area kept)
  bool cutmix = false;
  CutBox box;          // CutMix only
};

// The batch's draw: whether it is mixed, how, lam and the box (a host-side function of the seed).
MixResult draw_mix(const MixOptions& options, int height, int width, uint64_t seed, uint64_t epoch, uint64_t step);

// Mixes images (floating or u8 [N, H, W, C]) in place and returns the soft targets for labels
// (i64 [N], same device) over `classes` classes.
MixResult mix_batch(Tensor& images, const Tensor& labels, int64_t classes, const MixOptions& options, uint64_t seed,
                    uint64_t epoch, uint64_t step);

// A Beta(a, a) draw from the uniform stream of rng (Marsaglia-Tsang gamma variates).
double sample_beta(double a, SampleRng& rng);

}  // namespace cnn::data
