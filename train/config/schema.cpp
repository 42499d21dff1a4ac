// The config schema table, value validation, and the Markdown reference generated from it.
#include "train/config/schema.h"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <iomanip>
#include <sstream>

#include "engine/device.h"
#include "engine/error.h"

namespace cnn::train {

namespace {

// Every numeric key has finite bounds, stated in docs/config.md and in the messages: a value with
// no upper bound (1e308 seconds, 1e300 MiB) would overflow where it becomes an integer or a duration.
Range between(double min, double max) { return {min, max, false, false}; }
Range open_below(double min, double max) { return {min, max, true, false}; }  // (min, max]
Range unit_open_top() { return {0, 1, false, true}; }

KeySpec boolean(const char* section, const char* key, const char* def, const char* doc) {
  return {section, key, KeyType::boolean, def, {}, {}, doc};
}
KeySpec integer(const char* section, const char* key, const char* def, Range range, const char* doc) {
  return {section, key, KeyType::integer, def, range, {}, doc};
}
KeySpec real(const char* section, const char* key, const char* def, Range range, const char* doc) {
  return {section, key, KeyType::real, def, range, {}, doc};
}
// A real key whose empty value (the default) means "not set": the consumer falls back to its own default.
KeySpec optional_real(const char* section, const char* key, Range range, const char* doc) {
  KeySpec spec{section, key, KeyType::real, "", range, {}, doc};
  spec.may_be_empty = true;
  return spec;
}
// An integer key whose empty value (the default) means "not set", like optional_real.
KeySpec optional_integer(const char* section, const char* key, Range range, const char* doc) {
  KeySpec spec{section, key, KeyType::integer, "", range, {}, doc};
  spec.may_be_empty = true;
  return spec;
}
KeySpec text(const char* section, const char* key, const char* def, const char* doc) {
  return {section, key, KeyType::text, def, {}, {}, doc};
}
KeySpec choice(const char* section, const char* key, const char* def, std::vector<std::string> choices,
               const char* doc) {
  return {section, key, KeyType::choice, def, {}, std::move(choices), doc};
}
KeySpec list(const char* section, const char* key, KeyType type, const char* def, Range range, const char* doc) {
  return {section, key, type, def, range, {}, doc};
}


std::vector<KeySpec> build_schema() {
  using K = KeyType;
  std::vector<KeySpec> s = {
      // ---- model ----
      text("model", "name", "resnet50", "architecture from the model zoo (resnet18/34/50/101/152, vgg, efficientnet, small CNNs)"),
      integer("model", "num_classes", "1000", between(1, 1e6), "number of output classes of the classifier head"),
      text("model", "pretrained", "", "weights to start from (.safetensors or .h5); empty: random initialisation"),
      boolean("model", "pretrained_strict", "true", "refuse pretrained weights that lack a tensor of the model, hold one it does not have, or hold one of another shape (the head excepted unless pretrained_head); false: load what matches and list the rest"),
      boolean("model", "pretrained_head", "false", "also load the classifier head from `pretrained` (false: fresh head, for fine-tuning on new classes)"),
      integer("model", "in_channels", "3", between(1, 64), "channels of the input images"),
      optional_real("model", "dropout", unit_open_top(),
                    "dropout probability before the classifier; empty: the architecture's own (VGG 0.5, EfficientNet-B0 0.2, ..., ResNet 0)"),
      optional_real("model", "drop_path", unit_open_top(),
                    "stochastic depth: the largest drop probability of a residual block's branch, rising linearly with depth; "
                    "empty: the architecture's own (EfficientNet 0.2, others 0)"),
      boolean("model", "zero_init_residual", "false", "initialise the last BatchNorm weight of each residual block to zero"),
      boolean("model", "sync_bn", "false", "data-parallel runs: BatchNorm statistics over the whole global batch, reduced across ranks (SyncBatchNorm)"),
      // ---- data ----
      choice("data", "format", "folder", {"folder", "idx", "cifar", "packed"},
             "dataset layout: class folders of images, IDX files (MNIST family), CIFAR binaries, or a packed HDF5 file"),
      text("data", "path", "", "training data (folder or file)"),
      text("data", "val_path", "", "validation data; empty: no validation"),
      integer("data", "workers", "4", between(0, 256), "decoding worker threads (0: decode on the training thread)"),
      integer("data", "prefetch", "2", between(1, 64), "batches prepared ahead per worker"),
      integer("data", "batch_size", "256", between(1, 65536), "images per batch on each device"),
      integer("data", "image_size", "224", between(8, 4096), "side of the square training crop"),
      real("data", "crop_pct", "0.875", between(0.1, 1), "evaluation: centre crop of image_size taken from a resize to image_size / crop_pct"),
      list("data", "mean", K::real_list, "0.485, 0.456, 0.406", between(0, 255), "per-channel mean subtracted after scaling pixels to [0, 1]"),
      list("data", "std", K::real_list, "0.229, 0.224, 0.225", open_below(0, 255), "per-channel standard deviation divided by"),
      boolean("data", "drop_last", "true", "drop the last incomplete training batch of each epoch"),
      integer("data", "max_image_pixels", "89478485", between(0, 1e12),
              "an image whose header claims more pixels (width x height) than this is skipped as corrupt before it is decoded "
              "(decompression bombs; the default is Pillow's MAX_IMAGE_PIXELS); 0: no limit"),
      real("data", "max_corrupt_fraction", "0.1", between(0, 1),
           "stop the run when more than this fraction of the training images read in an epoch, or of the validation "
           "images, are unreadable (an epoch with no readable image always stops)"),
      // ---- augment ----
      boolean("augment", "random_resized_crop", "true", "random crop of random area and aspect ratio, resized to image_size (else: resize and centre crop)"),
      real("augment", "scale_min", "0.08", {0, 1, true, false}, "smallest crop area, as a fraction of the image"),
      real("augment", "ratio_min", "0.75", open_below(0, 100), "smallest crop aspect ratio (width / height)"),
      real("augment", "ratio_max", "1.3333333", open_below(0, 100), "largest crop aspect ratio"),
      integer("augment", "crop_padding", "0", between(0, 1024),
              "without random_resized_crop: a random image_size crop of the image zero-padded by this many pixels (CIFAR: 4)"),
      real("augment", "hflip", "0.5", between(0, 1), "probability of a horizontal flip"),
      real("augment", "color_jitter", "0", between(0, 1), "strength of random brightness, contrast and saturation changes (0: off)"),
      integer("augment", "randaugment_ops", "0", between(0, 10), "RandAugment: operations per image (0: off)"),
      integer("augment", "randaugment_magnitude", "9", between(0, 30), "RandAugment: magnitude of each operation"),
      real("augment", "random_erasing", "0", between(0, 1), "probability of erasing a random rectangle"),
      boolean("augment", "on_gpu", "false",
              "the loader delivers uint8 batches (after the crop or resize and the colour transforms); the padded random crop, "
              "the flip and the normalisation into the compute dtype run batched on the training device, so only uint8 crosses PCIe"),
      // ---- optim ----
      choice("optim", "name", "sgd", {"sgd", "adamw"}, "optimizer: SGD with momentum, or AdamW (decoupled weight decay)"),
      real("optim", "lr", "0.1", {0, 100, true, false}, "base learning rate (before the schedule and the linear scaling rule)"),
      real("optim", "momentum", "0.9", unit_open_top(), "SGD momentum"),
      boolean("optim", "nesterov", "false", "SGD: Nesterov momentum"),
      real("optim", "beta1", "0.9", unit_open_top(), "AdamW: decay of the first-moment estimate"),
      real("optim", "beta2", "0.999", unit_open_top(), "AdamW: decay of the second-moment estimate"),
      real("optim", "eps", "1e-8", open_below(0, 1), "AdamW: term added to the denominator"),
      real("optim", "weight_decay", "1e-4", between(0, 1), "weight decay (SGD: L2 added to the gradient; AdamW: decoupled)"),
      boolean("optim", "no_decay_bn_bias", "true", "no weight decay for 1-D parameters (BatchNorm weights and biases, all biases)"),
      text("optim", "head", "", "name prefix of the classifier head's parameters, for head_lr_mult; empty: the model's own head (fc for ResNet, classifier for VGG, EfficientNet and the small nets)"),
      real("optim", "head_lr_mult", "1", between(0, 1000), "learning-rate multiplier of the classifier head"),
      list("optim", "freeze", K::text_list, "", {}, "name prefixes of parameters to keep fixed (for example: conv1, bn1, layer1)"),
      integer("optim", "unfreeze_epoch", "-1", between(-1, 1e6), "epoch from which frozen parameters train too (-1: never)"),
      real("optim", "clip_grad_norm", "0", between(0, 1e6), "clip gradients to this global L2 norm (0: no clipping)"),
      // ---- schedule ----
      choice("schedule", "name", "warmup_cosine", {"warmup_cosine", "step", "multistep", "exponential", "constant", "plateau"},
             "learning-rate schedule, evaluated every optimizer step"),
      real("schedule", "warmup_epochs", "0", between(0, 1e4), "linear warmup length in epochs (fractions allowed), before any schedule"),
      real("schedule", "warmup_start_factor", "0", between(0, 1), "warmup starts at this fraction of the learning rate"),
      real("schedule", "min_lr", "0", between(0, 100), "warmup_cosine: learning rate at the end of training"),
      optional_integer("schedule", "epochs", between(1, 1e6),
                       "warmup_cosine: the epochs the cosine decays over; empty: [train] epochs (a resume that changes "
                       "train.epochs keeps the run's length unless this is given)"),
      integer("schedule", "step_size", "30", between(1, 1e6), "step: epochs between decays"),
      list("schedule", "milestones", K::integer_list, "30, 60, 90", between(1, 1e6), "multistep: epochs at which the rate decays"),
      real("schedule", "gamma", "0.1", {0, 1, true, false}, "step, multistep, exponential (per epoch) and plateau: decay factor"),
      choice("schedule", "plateau_metric", "val_loss", {"val_loss", "val_top1"}, "plateau: metric watched (loss: lower is better; top1: higher)"),
      integer("schedule", "patience", "10", between(0, 1e6), "plateau: epochs without improvement before decaying"),
      real("schedule", "threshold", "1e-4", between(0, 1), "plateau: relative improvement that counts"),
      integer("schedule", "cooldown", "0", between(0, 1e6), "plateau: epochs to wait after a decay"),
      integer("schedule", "reference_batch_size", "0", between(0, 1e7),
              "linear scaling rule: lr *= global batch / this (0: use lr as given)"),
      // ---- train ----
      integer("train", "epochs", "90", between(1, 1e6), "training epochs"),
      integer("train", "max_steps", "0", between(0, 1e12), "stop after this many optimizer steps (0: no limit)"),
      integer("train", "accumulate", "1", between(1, 1024), "batches whose gradients are summed per optimizer step"),
      choice("train", "checkpointing", "none", {"none", "blocks"}, "gradient checkpointing: recompute each block's activations in backward"),
      boolean("train", "cuda_graphs", "false",
              "capture the training step as a CUDA graph after 3 eager steps and replay it (on the CPU: its kernel "
              "calls); steps that cannot be captured run eagerly, with the reason in the log"),
      boolean("train", "memory_check", "true", "refuse a batch size whose estimated step memory exceeds the memory available (false: try anyway)"),
      {"train", "device", KeyType::device, "auto", {}, {}, "where to train: auto (cuda when a CUDA device is there, else cpu), cpu, cuda (device 0) or cuda:N"},
      integer("train", "seed", "0", between(0, 4294967295.0), "seed of initialisation, shuffling, augmentation and dropout"),
      boolean("train", "deterministic", "false", "bitwise reproducible runs (deterministic algorithms only; may be slower)"),
      integer("train", "threads", "0", between(0, 1024), "CPU threads of the CPU backend (0: all cores)"),
      choice("train", "cpu_convolutions", "auto", {"auto", "onednn", "reference"},
             "f32 and bf16 CPU convolutions: oneDNN's primitives, or im2col + OpenBLAS (auto: oneDNN where the build has it)"),
      boolean("train", "cudnn_benchmark", "true", "time cuDNN algorithms per shape and keep the fastest"),
      real("train", "label_smoothing", "0", unit_open_top(), "label smoothing of the cross-entropy loss"),
      real("train", "mixup", "0", between(0, 100), "MixUp Beta(alpha, alpha) parameter (0: off)"),
      real("train", "cutmix", "0", between(0, 100), "CutMix Beta(alpha, alpha) parameter (0: off)"),
      real("train", "mix_prob", "1", between(0, 1), "probability of applying MixUp/CutMix to a batch (one of them, at random, when both are on)"),
      integer("train", "eval_every", "1", between(1, 1e6), "epochs between validation passes"),
      // ---- precision ----
      choice("precision", "mode", "fp32", {"fp32", "fp16", "bf16"},
             "compute dtype of activations (master weights and optimizer state stay f32); on a CPU with AMX or "
             "AVX-512 BF16, bf16 convolutions run several times faster than fp32"),
      choice("precision", "loss_scale", "dynamic", {"dynamic", "fixed"}, "fp16 loss scaling: dynamic (grows, backs off on overflow) or fixed at init_scale"),
      real("precision", "init_scale", "65536", open_below(0, 1e12), "initial loss scale"),
      real("precision", "growth_factor", "2", open_below(1, 1000), "scale multiplier after growth_interval clean steps"),
      real("precision", "backoff_factor", "0.5", {0, 1, true, true}, "scale multiplier after a step with inf/nan gradients"),
      integer("precision", "growth_interval", "2000", between(1, 1e9), "clean steps between scale increases"),
      boolean("precision", "tf32", "false",
              "TF32 tensor cores for f32 convolutions and matrix products on GPUs that have them (about 1e-3 relative error per "
              "product, several times faster); false: exact f32 (FMA) math. Ignored on the CPU"),
      boolean("precision", "cast_cache", "true",
              "fp16/bf16: keep the convolution and linear weights cast to the compute dtype, rewritten by the optimizer's "
              "update pass, instead of casting every f32 master weight in every forward (torch.autocast's cache_enabled); "
              "the same numbers either way"),
      // ---- checkpoint ----
      integer("checkpoint", "every_epochs", "1", between(0, 1e6), "save last.h5 every this many epochs (0: only at the end)"),
      integer("checkpoint", "every_steps", "0", between(0, 1e12), "also save last.h5 every this many steps (0: off)"),
      boolean("checkpoint", "save_best", "true", "keep best.h5, the checkpoint with the best validation metric"),
      choice("checkpoint", "best_metric", "val_top1", {"val_top1", "val_loss", "ema_val_top1", "ema_val_loss"},
             "metric that decides best.h5; ema_*: the EMA weights' (needs [ema] decay > 0), and best.h5 then holds the EMA weights"),
      text("checkpoint", "resume", "", "checkpoint to resume from; 'auto': the run folder's last.h5 when present; empty: start afresh"),
      boolean("checkpoint", "resume_anyway", "false",
              "resume even when data.batch_size, train.seed, data.image_size, precision.mode or train.accumulate differ from the "
              "checkpoint's (a warning per changed key; false: such a resume is refused)"),
      boolean("checkpoint", "export_safetensors", "true", "also write the final weights as model.safetensors"),
      // ---- ema ----
      real("ema", "decay", "0", unit_open_top(),
           "exponential moving average of the weights: ema += (1 - decay) (weights - ema) after every every_steps steps (0: off; "
           "timm's --model-ema-decay default: 0.9998)"),
      boolean("ema", "warmup", "true", "use min(decay, (1 + t) / (10 + t)) for the update after t others (TensorFlow's ExponentialMovingAverage num_updates)"),
      integer("ema", "every_steps", "1", between(1, 1e9), "optimizer steps between EMA updates"),
      choice("ema", "device", "same", {"same", "cpu"}, "where the EMA is kept: on the training device, or in host memory (saves device memory)"),
      // ---- swa ----
      integer("swa", "start_epoch", "0", between(0, 1e6),
              "stochastic weight averaging from this epoch (1-based) on: the learning rate follows SWALR and the weights at the end "
              "of SWA epochs are averaged; at the end, BatchNorm statistics recomputed, validated, saved as swa.h5 (0: off)"),
      real("swa", "lr", "0.05", open_below(0, 100), "SWALR's learning rate, reached after anneal_epochs SWA epochs"),
      integer("swa", "anneal_epochs", "10", between(0, 1e6), "SWA epochs over which the rate anneals to lr (0: lr from the first SWA epoch)"),
      choice("swa", "anneal", "cos", {"cos", "linear"}, "shape of SWALR's annealing"),
      integer("swa", "every_epochs", "1", between(1, 1e6), "SWA epochs between models added to the average"),
      // ---- log ----
      choice("log", "level", "normal", {"quiet", "normal", "verbose"}, "console output: quiet (errors and summary), normal, verbose"),
      choice("log", "progress", "auto", {"auto", "bar", "lines"}, "progress display: a bar on a terminal and periodic lines otherwise (auto), or forced"),
      integer("log", "every_steps", "50", between(1, 1e9), "steps between progress lines and logged training metrics"),
      boolean("log", "tensorboard", "true", "write TensorBoard event files in the run folder"),
      boolean("log", "jsonl", "true", "write metrics.jsonl (one JSON object per line) in the run folder"),
      boolean("log", "images", "true", "pictures of the run: the first augmented batch, the confusion matrix and the most confident mistakes as PNGs in the run folder and TensorBoard images"),
      integer("log", "histogram_every", "0", between(0, 1e6), "epochs between TensorBoard histograms of each layer's weights and gradients (0: none)"),
      integer("log", "profile_steps", "0", between(0, 1e6),
              "record this many optimizer steps with the profiler after profile_warmup steps, then write profile.txt, "
              "profile.json and trace.json (a Chrome trace) in the run folder (0: off)"),
      integer("log", "profile_warmup", "5", between(0, 1e9), "steps of this run before the profiled ones (allocator, cuDNN choices and caches settle)"),
      boolean("log", "report", "true", "write report.html in the run folder after every epoch (curves, confusion matrix, per-class scores, pictures)"),
      // ---- distributed ----
      real("distributed", "bucket_mb", "25", open_below(0, 4096), "data-parallel runs: size of the gradient buckets all-reduced during backward, in MiB"),
      real("distributed", "timeout_s", "300", open_below(0, 604800), "data-parallel runs: a collective that waits longer than this for another rank ends the job"),
      // ---- run ----
      text("run", "name", "", "run name; empty: the config file's name without extension"),
      text("run", "dir", "runs", "parent folder of run folders; a run writes to dir/name"),
  };
  return s;
}

bool trimmed_equals_lower(const std::string& text, const char* word) {
  std::string t;
  for (char c : text) t += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return t == word;
}

std::string format_number(double v) {
  std::ostringstream out;
  out << std::setprecision(12) << v;
  return out.str();
}

}  // namespace

bool Range::contains(double v) const {
  if (std::isnan(v)) return false;
  if (min_open ? !(v > min) : !(v >= min)) return false;
  if (max_open ? !(v < max) : !(v <= max)) return false;
  return true;
}

std::string Range::str() const {
  const bool has_min = min > -kUnbounded, has_max = max < kUnbounded;
  if (has_min && has_max)
    return std::string(min_open ? "(" : "[") + format_number(min) + ", " + format_number(max) + (max_open ? ")" : "]");
  if (has_min) return std::string(min_open ? "> " : ">= ") + format_number(min);
  if (has_max) return std::string(max_open ? "< " : "<= ") + format_number(max);
  return "any";
}

std::string Range::phrase() const {
  const std::string s = str();
  if (s == "any") return "";
  return s[0] == '[' || s[0] == '(' ? " in " + s : " " + s;
}

const char* key_type_name(KeyType type) {
  switch (type) {
    case KeyType::boolean: return "bool";
    case KeyType::integer: return "int";
    case KeyType::real: return "real";
    case KeyType::text: return "text";
    case KeyType::device: return "device";
    case KeyType::choice: return "choice";
    case KeyType::integer_list: return "int list";
    case KeyType::real_list: return "real list";
    case KeyType::text_list: return "text list";
  }
  return "?";
}

bool parse_bool(const std::string& text, bool& out) {
  for (const char* yes : {"true", "yes", "on", "1"})
    if (trimmed_equals_lower(text, yes)) return out = true, true;
  for (const char* no : {"false", "no", "off", "0"})
    if (trimmed_equals_lower(text, no)) return out = false, true;
  return false;
}

bool parse_integer(const std::string& text, int64_t& out) {
  const char* begin = text.data();
  const char* end = begin + text.size();
  if (begin != end && *begin == '+') ++begin;
  const auto [ptr, ec] = std::from_chars(begin, end, out);
  return ec == std::errc() && ptr == end && begin != end;
}

bool parse_real(const std::string& text, double& out) {
  const char* begin = text.data();
  const char* end = begin + text.size();
  if (begin != end && *begin == '+') ++begin;
  const auto [ptr, ec] = std::from_chars(begin, end, out);
  return ec == std::errc() && ptr == end && begin != end && std::isfinite(out);
}

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> items;
  size_t start = 0;
  const auto trim = [](const std::string& s) {
    const size_t b = s.find_first_not_of(" \t");
    if (b == std::string::npos) return std::string();
    return s.substr(b, s.find_last_not_of(" \t") - b + 1);
  };
  if (trim(text).empty()) return items;
  for (;;) {
    const size_t comma = text.find(',', start);
    items.push_back(trim(text.substr(start, comma == std::string::npos ? std::string::npos : comma - start)));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return items;
}

std::string KeySpec::allowed() const {
  switch (type) {
    case KeyType::boolean: return "true or false";
    case KeyType::integer: return "an integer" + range.phrase();
    case KeyType::real: return "a number" + range.phrase() + (may_be_empty ? ", or empty" : "");
    case KeyType::text: return "any text";
    case KeyType::device: return "auto, cpu, cuda or cuda:N";
    case KeyType::choice: {
      std::string s;
      for (const std::string& c : choices) s += (s.empty() ? "one of " : ", ") + c;
      return s;
    }
    case KeyType::integer_list: return "comma-separated integers" + range.phrase();
    case KeyType::real_list: return "comma-separated numbers" + range.phrase();
    case KeyType::text_list: return "comma-separated names";
  }
  return "";
}

std::string KeySpec::validate(const std::string& value) const {
  if (may_be_empty && value.empty()) return "";
  const auto numbers = [&](const std::vector<std::string>& items, bool integral) -> std::string {
    for (const std::string& item : items) {
      double v = 0;
      int64_t i = 0;
      const bool ok = integral ? parse_integer(item, i) : parse_real(item, v);
      if (integral) v = static_cast<double>(i);
      if (!ok) return "'" + item + "' is not " + (integral ? "an integer" : "a number");
      if (!range.contains(v)) return item + " is outside " + range.str();
    }
    return "";
  };
  bool b = false;
  switch (type) {
    case KeyType::boolean:
      return parse_bool(value, b) ? "" : "not a boolean";
    case KeyType::integer: return numbers({value}, true);
    case KeyType::real: return numbers({value}, false);
    case KeyType::text: return "";
    case KeyType::device:
      if (value == "auto") return "";
      try {
        Device::parse(value);
        return "";
      } catch (const Error&) {
        return "not a device";
      }
    case KeyType::choice:
      for (const std::string& c : choices)
        if (c == value) return "";
      return "not one of the choices";
    case KeyType::integer_list: return numbers(split_list(value), true);
    case KeyType::real_list: return numbers(split_list(value), false);
    case KeyType::text_list:
      for (const std::string& item : split_list(value))
        if (item.empty()) return "an empty name between commas";
      return "";
  }
  return "";
}

const std::vector<std::string>& config_sections() {
  static const std::vector<std::string> sections = {"model", "data",      "augment",    "optim", "schedule",
                                                    "train", "precision", "checkpoint", "ema",   "swa",         "log", "distributed", "run"};
  return sections;
}

const std::vector<KeySpec>& config_schema() {
  static const std::vector<KeySpec> schema = build_schema();
  return schema;
}

const KeySpec* find_key(const std::string& section, const std::string& key) {
  for (const KeySpec& k : config_schema())
    if (k.section == section && k.key == key) return &k;
  return nullptr;
}

std::string config_reference_markdown() {
  std::ostringstream md;
  md << "# Training configuration reference\n\n"
     << "Generated from the schema in `train/config/schema.cpp` by `config_reference_markdown()`; a test\n"
     << "checks that this page matches it. Config files are INI: `[section]` headers, `key = value` lines,\n"
     << "comments starting with `;` or `#`. Lines may have up to 4096 characters (comments any number);\n"
     << "a UTF-8 byte-order mark at the start is skipped. Every key is optional; its default applies when absent.\n"
     << "Unknown sections and keys, malformed values and values out of range are refused before any\n"
     << "work starts, with `file:line` and the closest valid name. `--set section.key=value` overrides a\n"
     << "key from the command line. Booleans accept true/false, yes/no, on/off, 1/0; lists are\n"
     << "comma-separated.\n";
  for (const std::string& section : config_sections()) {
    md << "\n## [" << section << "]\n\n| key | type | default | allowed | description |\n| --- | --- | --- | --- | --- |\n";
    for (const KeySpec& k : config_schema()) {
      if (k.section != section) continue;
      md << "| `" << k.key << "` | " << key_type_name(k.type) << " | " << (k.default_value.empty() ? "" : "`")
         << k.default_value << (k.default_value.empty() ? "" : "`") << " | " << k.allowed() << " | " << k.doc << " |\n";
    }
  }
  return md.str();
}

}  // namespace cnn::train
