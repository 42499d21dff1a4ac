// Reading a Config into TrainSettings (see train_settings.h).
#include "train/train_settings.h"

#include <algorithm>
#include <filesystem>

#include "engine/cpu_threads.h"
#include "engine/cuda_context.h"
#include "engine/error.h"
#include "train/eval_support.h"

namespace cnn::train {

namespace {
// Combinations that cannot mean what they say are refused before any work.
void refuse_contradictions(const Config& config) {
  CNN_CHECK(!(config.boolean("augment.on_gpu") && config.real("augment.random_erasing") > 0), config.origin("augment.random_erasing"),
            ": augment.random_erasing works on normalised images, which with augment.on_gpu = true only exist on the ",
            "device; set on_gpu = false to use random erasing");
  CNN_CHECK(!(config.boolean("augment.random_resized_crop") && config.integer("augment.crop_padding") > 0),
            config.origin("augment.crop_padding"), ": augment.crop_padding applies to the plain random crop; with ",
            "random_resized_crop = true it would be ignored: set one of them back");
  CNN_CHECK(!(config.text("checkpoint.best_metric").starts_with("ema_") && config.real("ema.decay") == 0),
            config.origin("checkpoint.best_metric"), ": [checkpoint] best_metric = ", config.text("checkpoint.best_metric"),
            " needs the EMA of the weights: set [ema] decay (e.g. 0.9998), or best_metric = val_top1");
  CNN_CHECK(config.integer("swa.start_epoch") <= config.integer("train.epochs"), config.origin("swa.start_epoch"),
            ": [swa] start_epoch = ", config.integer("swa.start_epoch"), " comes after the last epoch (train.epochs = ",
            config.integer("train.epochs"), "); lower it, or 0 for no SWA");
  CNN_CHECK(!config.text("data.path").empty(), config.origin("data.path"), ": [data] path is empty; set it to the training data");
}

// The dataset spec of data/open_dataset.h for a [data] path and split.
std::string dataset_spec(const Config& config, const std::string& path, bool train) {
  const std::string& format = config.text("data.format");
  if (format == "idx") {  // Fashion-MNIST's folder gets its class names; other IDX data numbered classes
    const bool fashion = path.find("fashion") != std::string::npos;
    return (fashion ? "fashion-mnist:" : "mnist:") + path + (train ? ":train" : ":test");
  }
  if (format == "cifar")
    return (config.integer("model.num_classes") == 100 ? "cifar100:" : "cifar10:") + path + (train ? ":train" : ":test");
  // A folder and format = packed disagree: say so rather than read the folder as an ImageFolder.
  std::error_code ec;
  CNN_CHECK(format != "packed" || !std::filesystem::is_directory(path, ec), config.origin("data.format"),
            ": [data] format = packed but '", path,
            "' is a folder; give the .h5 file that cnn_pack wrote (or set format = folder to read the folder's images)");
  if (format == "packed") return "packed:" + path;  // a folder or another file is refused, not opened as something else
  return path;  // folder (a directory) or list files are recognised by open_dataset
}

DType compute_dtype(const std::string& mode) {
  return mode == "fp16" ? DType::f16 : mode == "bf16" ? DType::bf16 : DType::f32;
}

// "cuda" without an index means the rank's own GPU under a launcher (cuda:LOCAL_RANK); "auto" means
// "cuda" when a CUDA device is there, else the CPU (as `"cuda" if torch.cuda.is_available() else "cpu"`).
Device training_device(const Config& config, const distributed::World& world) {
  const std::string& text = config.text("train.device");
  const bool any_cuda = text == "cuda" || (text == "auto" && cuda::is_available());
  if (text == "auto" && !any_cuda) return Device::cpu();
  if (any_cuda) return Device::cuda(world.distributed() ? world.local_rank : 0);
  return Device::parse(text);
}

CpuConvolutions cpu_convolutions_setting(const Config& config) {
  const std::string& text = config.text("train.cpu_convolutions");
  if (text == "auto") return onednn_available() ? CpuConvolutions::onednn : CpuConvolutions::reference;
  CNN_CHECK(text != "onednn" || onednn_available(), config.origin("train.cpu_convolutions"),
            ": cpu_convolutions = onednn, but this build of cnn has no oneDNN: install libdnnl-dev (Debian) and "
            "rebuild, or set auto or reference");
  return parse_cpu_convolutions(text);
}

ComputeSettings compute_settings(const Config& config, const distributed::World& world) {
  return {.device = training_device(config, world),
          .device_auto = config.text("train.device") == "auto",
          .threads = static_cast<int>(config.integer("train.threads")),
          .cpu_convolutions = cpu_convolutions_setting(config),
          .cudnn_benchmark = config.boolean("train.cudnn_benchmark"),
          .deterministic = config.boolean("train.deterministic"),
          .tf32 = config.boolean("precision.tf32"),
          .seed = static_cast<uint64_t>(config.integer("train.seed"))};
}

RunSettings run_settings(const Config& config) {
  RunSettings run{.name = config.text("run.name"),
                  .parent = config.text("run.dir"),
                  .resume = config.text("checkpoint.resume"),
                  .resume_keys = resume_keys(config),
                  .resume_anyway = config.boolean("checkpoint.resume_anyway")};
  if (run.name.empty()) run.name = config.source().empty() ? "run" : std::filesystem::path(config.source()).stem().string();
  // The name becomes one folder under run.dir: a '/' or '..' would write the run somewhere else
  // (outside run.dir, or into another run's folder without any resume check).
  CNN_CHECK(run.name.find('/') == std::string::npos && run.name != "." && run.name != "..", config.origin("run.name"),
            ": [run] name = '", run.name, "' is not one folder name; a run name may not hold '/' or be '.' or '..' ",
            "(the run folder is <run.dir>/<time>_<name>; put the path in [run] dir)");
  return run;
}

DataSettings data_settings(const Config& config, const ComputeSettings& compute, DType compute_dtype,
                           const distributed::World& world) {
  DataSettings data;
  data.train_spec = dataset_spec(config, config.text("data.path"), true);
  if (!config.text("data.val_path").empty()) data.validation_spec = dataset_spec(config, config.text("data.val_path"), false);
  data.classes = config.integer("model.num_classes");
  data.classes_origin = config.origin("model.num_classes");
  data.classes_from_data = data.classes_origin == "default";
  data.channels = static_cast<int>(config.integer("model.in_channels"));
  data.image_size = static_cast<int>(config.integer("data.image_size"));
  data.normalize = normalize_of(config, data.channels);
  data.max_corrupt_fraction = config.real("data.max_corrupt_fraction");
  data::LoaderOptions& loader = data.loader;
  loader.batch_size = config.integer("data.batch_size");
  data.batch_size_origin = config.origin("data.batch_size");
  loader.workers = static_cast<int>(config.integer("data.workers"));
  loader.prefetch = static_cast<int>(config.integer("data.prefetch") * std::max<int64_t>(1, config.integer("data.workers")));
  loader.shuffle = true;
  loader.seed = compute.seed;
  loader.drop_last = config.boolean("data.drop_last");
  loader.max_image_pixels = config.integer("data.max_image_pixels");  // the validation loader's too
  // Each rank trains on its shard; every rank must make the same number of steps, so the shards are
  // padded to equal length (DistributedSampler's default) unless drop_last cuts them.
  loader.rank = world.rank;
  loader.world_size = world.world_size;
  loader.pad_shards = world.distributed() && !loader.drop_last;
  loader.dtype = config.boolean("augment.on_gpu") ? DType::u8 : compute_dtype;
  loader.device = compute.device;
  if (!data.validation_spec.empty()) data.validation_transforms = eval_pipeline(config, data.channels);
  return data;
}

AugmentSettings augment_settings(const Config& config) {
  CNN_CHECK(config.real("augment.ratio_min") <= config.real("augment.ratio_max"), config.origin("augment.ratio_min"),
            ": [augment] ratio_min = ", config.real("augment.ratio_min"), " is above ratio_max = ", config.real("augment.ratio_max"),
            " (", config.origin("augment.ratio_max"), "); the aspect ratios are the range [ratio_min, ratio_max]");
  return {.on_device = config.boolean("augment.on_gpu"),
          .random_resized_crop = config.boolean("augment.random_resized_crop"),
          .scale_min = config.real("augment.scale_min"),
          .ratio_min = config.real("augment.ratio_min"),
          .ratio_max = config.real("augment.ratio_max"),
          .crop_padding = static_cast<int>(config.integer("augment.crop_padding")),
          .hflip = config.real("augment.hflip"),
          .color_jitter = config.real("augment.color_jitter"),
          .randaugment_ops = static_cast<int>(config.integer("augment.randaugment_ops")),
          .randaugment_magnitude = static_cast<int>(config.integer("augment.randaugment_magnitude")),
          .random_erasing = config.real("augment.random_erasing")};
}

ModelSettings model_settings(const Config& config) {
  return {.name = config.text("model.name"),
          .options = {.dropout = config.optional_real("model.dropout"),
                      .drop_path = config.optional_real("model.drop_path"),
                      .zero_init_residual = config.boolean("model.zero_init_residual")},
          .pretrained = config.text("model.pretrained"),
          .pretrained_head = config.boolean("model.pretrained_head"),
          .pretrained_strict = config.boolean("model.pretrained_strict"),
          .pretrained_origin = config.origin("model.pretrained"),
          .gradient_checkpointing = config.text("train.checkpointing") == "blocks",
          .sync_bn = config.boolean("model.sync_bn")};
}

OptimSettings optim_settings(const Config& config, const distributed::World& world) {
  OptimSettings optim;
  optim.adamw = config.text("optim.name") == "adamw";
  optim.adamw_options = {config.real("optim.beta1"), config.real("optim.beta2"), config.real("optim.eps")};
  optim.sgd_options = {config.real("optim.momentum"), config.boolean("optim.nesterov")};
  optim.groups.weight_decay = config.real("optim.weight_decay");
  optim.groups.no_decay_1d = config.boolean("optim.no_decay_bn_bias");
  optim.groups.head_prefix = config.text("optim.head");
  optim.head_origin = config.origin("optim.head");
  optim.groups.head_lr_mult = config.real("optim.head_lr_mult");
  optim.frozen = config.texts("optim.freeze");
  optim.unfreeze_epoch = config.integer("optim.unfreeze_epoch");
  optim.clip_grad_norm = config.real("optim.clip_grad_norm");
  const int64_t images_per_step = config.integer("data.batch_size") * config.integer("train.accumulate") * world.world_size;
  optim.schedule = schedule_options(config, 1, images_per_step);
  return optim;
}

LossSettings loss_settings(const Config& config) {
  LossSettings loss;
  loss.label_smoothing = config.real("train.label_smoothing");
  loss.mixing = config.real("train.mixup") > 0 || config.real("train.cutmix") > 0;
  loss.mix.mixup_alpha = config.real("train.mixup");
  loss.mix.cutmix_alpha = config.real("train.cutmix");
  loss.mix.probability = config.real("train.mix_prob");
  loss.mix.label_smoothing = loss.label_smoothing;
  return loss;
}
}  // namespace

std::vector<ResumeKey> resume_keys(const Config& config) {
  std::vector<ResumeKey> keys;
  for (const char* name : {"data.batch_size", "train.seed", "data.image_size"})
    keys.push_back({name, std::to_string(config.integer(name)), config.origin(name)});
  keys.push_back({"precision.mode", config.text("precision.mode"), config.origin("precision.mode")});
  keys.push_back({"train.accumulate", std::to_string(config.integer("train.accumulate")), config.origin("train.accumulate")});
  return keys;
}

TrainSettings from_config(const Config& config, const distributed::World& world) {
  refuse_contradictions(config);
  TrainSettings settings;
  settings.compute = compute_settings(config, world);
  settings.run = run_settings(config);
  settings.precision.mode = config.text("precision.mode");
  settings.precision.mode_origin = config.origin("precision.mode");
  settings.precision.compute = compute_dtype(settings.precision.mode);
  settings.precision.loss_scaler = loss_scaler_options(config);
  settings.precision.cast_cache = config.boolean("precision.cast_cache");
  settings.data = data_settings(config, settings.compute, settings.precision.compute, world);
  settings.augment = augment_settings(config);
  settings.model = model_settings(config);
  settings.optim = optim_settings(config, world);
  settings.loss = loss_settings(config);
  settings.loop = {.epochs = config.integer("train.epochs"),
                   .max_steps = config.integer("train.max_steps"),
                   .accumulate = config.integer("train.accumulate"),
                   .accumulate_origin = config.origin("train.accumulate"),
                   .eval_every = config.integer("train.eval_every"),
                   .memory_check = config.boolean("train.memory_check"),
                   .graphs = config.boolean("train.cuda_graphs")};
  settings.checkpoint = {.every_epochs = config.integer("checkpoint.every_epochs"),
                         .every_steps = config.integer("checkpoint.every_steps"),
                         .save_best = config.boolean("checkpoint.save_best"),
                         .best_is_loss = config.text("checkpoint.best_metric").ends_with("val_loss"),
                         .best_of_ema = config.text("checkpoint.best_metric").starts_with("ema_"),
                         .plateau_watches_top1 = config.text("schedule.plateau_metric") == "val_top1",
                         .export_safetensors = config.boolean("checkpoint.export_safetensors")};
  settings.ema = {.decay = config.real("ema.decay"),
                  .warmup = config.boolean("ema.warmup"),
                  .every_steps = config.integer("ema.every_steps"),
                  .on_cpu = config.text("ema.device") == "cpu"};
  settings.swa = {.start_epoch = config.integer("swa.start_epoch"), .every_epochs = config.integer("swa.every_epochs")};
  settings.log = {.level = parse_log_level(config.text("log.level")),
                  .progress = parse_progress_mode(config.text("log.progress")),
                  .every_steps = config.integer("log.every_steps"),
                  .jsonl = config.boolean("log.jsonl"),
                  .tensorboard = config.boolean("log.tensorboard"),
                  .images = config.boolean("log.images"),
                  .histogram_every = config.integer("log.histogram_every"),
                  .report = config.boolean("log.report"),
                  .profile_steps = config.integer("log.profile_steps"),
                  .profile_warmup = config.integer("log.profile_warmup")};
  settings.distributed = {.world = world,
                          .bucket_bytes = config.real("distributed.bucket_mb") * (1 << 20),
                          .timeout_seconds = config.real("distributed.timeout_s")};
  settings.resolved_ini = config.to_ini();
  return settings;
}

void configure_backend(const ComputeSettings& compute) {
  if (compute.device.is_cuda()) cuda::require_device(compute.device.index);
  set_cpu_threads(compute.threads);
  set_cpu_convolutions(compute.cpu_convolutions);
  cuda::set_cudnn_benchmark(compute.cudnn_benchmark);
  // The CPU backend and the project's CUDA kernels are deterministic for a given thread count; on a
  // GPU, cuDNN must also be kept to its deterministic algorithms.
  cuda::set_cudnn_deterministic(compute.deterministic);
  cuda::set_allow_tf32(compute.tf32);
}

std::string precision_advice(const TrainSettings& settings) {
  if (!settings.precision.fp16() || !settings.compute.device.is_cpu()) return "";
  return settings.precision.mode_origin +
         ": precision.mode = fp16 on the CPU computes its convolutions on the slow reference path (only f32 and "
         "bf16 go to oneDNN; tens of times slower than fp32); use mode = bf16, the CPU's mixed precision (AMX or "
         "AVX-512 BF16 where the CPU has them), or fp32";
}

}  // namespace cnn::train
