// What a training run reads from its Config, read once (from_config) into typed fields before any
// work starts, one struct per config section. The trainer's steps take these structs; nothing in
// the epoch loop or the training step looks a key up by name. Settings that contradict each other
// are refused here, with the file:line of the offending key.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "data/batch_augment.h"
#include "data/loader.h"
#include "data/transforms.h"
#include "engine/cpu_convolutions.h"
#include "engine/device.h"
#include "engine/distributed/world.h"
#include "engine/dtype.h"
#include "layers/registry.h"
#include "train/config/config.h"
#include "train/ema.h"
#include "train/log/console.h"
#include "train/loss_scaler.h"
#include "train/optim/adamw.h"
#include "train/optim/param_groups.h"
#include "train/optim/sgd.h"
#include "train/schedule/lr_schedule.h"
#include "train/swa.h"

namespace cnn::train {

// [train]: where and how the backend computes.
struct ComputeSettings {
  Device device = Device::cpu();
  bool device_auto = false;  // [train] device = auto chose `device`
  int threads = 0;  // CPU threads (0: all cores)
  CpuConvolutions cpu_convolutions = CpuConvolutions::reference;  // [train] cpu_convolutions, auto resolved
  bool cudnn_benchmark = true;
  bool deterministic = false;
  bool tf32 = false;  // [precision] tf32: TF32 tensor cores for f32 convolutions and GEMMs
  uint64_t seed = 0;
};

// A key that a resumed run must share with its checkpoint (the batches, the random draws or the
// dtypes follow from it): "section.key", its value, and where it was set.
struct ResumeKey {
  std::string name, value, origin;
};

// [run], [checkpoint] resume and resume_anyway: where the run folder is, and what a resume checks.
struct RunSettings {
  std::string name;    // [run] name, or the config file's stem, or "run"
  std::string parent;  // [run] dir
  std::string resume;  // [checkpoint] resume: "", "auto", a run folder or a checkpoint file
  std::vector<ResumeKey> resume_keys;  // of this config (resume_keys below)
  bool resume_anyway = false;          // resume even when a resume key differs from the checkpoint's (a warning each)
};

// [data] (and the [model] keys that describe the data: channels and classes).
struct DataSettings {
  std::string train_spec;       // the dataset spec of data/open_dataset.h for [data] path
  std::string validation_spec;  // "" without [data] val_path
  int64_t classes = 0;
  std::string classes_origin;  // where [model] num_classes was set, for messages
  bool classes_from_data = false;  // [model] num_classes left out: the training data's class count decides
  int channels = 0;
  int image_size = 0;
  data::Normalize normalize;
  double max_corrupt_fraction = 0.1;  // of the training images read in an epoch, before the run stops
  std::string batch_size_origin;       // where data.batch_size was set, for messages
  data::LoaderOptions loader;                           // the training loader (device set, shuffled)
  std::optional<data::Pipeline> validation_transforms;  // set when there is validation data
};

// [augment]: the loader's transforms, or the batched crop and flip on the device.
struct AugmentSettings {
  bool on_device = false;
  bool random_resized_crop = true;
  double scale_min = 0.08, ratio_min = 0.75, ratio_max = 4.0 / 3.0;
  int crop_padding = 0;
  double hflip = 0.5;
  double color_jitter = 0;
  int randaugment_ops = 0, randaugment_magnitude = 9;
  double random_erasing = 0;
};

// [model].
struct ModelSettings {
  std::string name;
  ModelOptions options;
  std::string pretrained;  // "" : random initialisation
  bool pretrained_head = false;
  bool pretrained_strict = true;  // every tensor but the head's must be in the file, and nothing else
  std::string pretrained_origin;  // where [model] pretrained was set, for messages
  bool gradient_checkpointing = false;  // train.checkpointing = blocks
  bool sync_bn = false;                 // data-parallel: BatchNorm over the global batch
};

// [distributed], and where this process stands in the job (from its launcher's environment).
struct DistributedSettings {
  distributed::World world;
  double bucket_bytes = 25.0 * (1 << 20);
  double timeout_seconds = 300;
};

// [optim] and [schedule].
struct OptimSettings {
  bool adamw = false;  // else SGD
  AdamWOptions adamw_options;
  SgdOptions sgd_options;
  ParamGroupOptions groups;  // head_prefix "": the model's own head (resolved when the optimizer is built)
  std::string head_origin;   // where [optim] head was set, for messages
  std::vector<std::string> frozen;
  int64_t unfreeze_epoch = -1;
  double clip_grad_norm = 0;  // 0: no clipping
  ScheduleOptions schedule;   // steps_per_epoch is set once the data is open
};

// The loss: label smoothing, or MixUp/CutMix soft targets.
struct LossSettings {
  double label_smoothing = 0;
  bool mixing = false;  // MixUp or CutMix on
  data::MixOptions mix;
};

// [precision].
struct PrecisionSettings {
  std::string mode = "fp32";  // fp32 | fp16 | bf16, as written in the log
  std::string mode_origin;    // where precision.mode was set, for messages
  DType compute = DType::f32;
  LossScalerOptions loss_scaler;
  // Keep low-precision copies of the weights that layers cast (Module::keep_low_precision_copies).
  bool cast_cache = true;
  bool fp16() const { return compute == DType::f16; }
};

// [train] epochs and steps.
struct LoopSettings {
  int64_t epochs = 1;
  int64_t max_steps = 0;  // 0: no limit
  int64_t accumulate = 1;
  std::string accumulate_origin;  // where train.accumulate was set, for messages
  int64_t eval_every = 1;
  bool memory_check = true;  // refuse a step estimated not to fit (train/memory_estimate.h)
  bool graphs = false;       // train.cuda_graphs: the step captured and replayed (train/step_graph.h)
};

// [checkpoint] (resume aside: RunSettings).
struct CheckpointSettings {
  int64_t every_epochs = 1;
  int64_t every_steps = 0;
  bool save_best = true;
  bool best_is_loss = false;  // best.h5 by val_loss (else val_top1)
  bool best_of_ema = false;   // ... of the EMA weights (ema_val_*), which best.h5 then holds
  bool plateau_watches_top1 = false;
  bool export_safetensors = true;
};

// [log].
struct LogSettings {
  LogLevel level = LogLevel::normal;
  ProgressMode progress = ProgressMode::automatic;
  int64_t every_steps = 50;
  bool jsonl = true;
  bool tensorboard = true;
  bool images = true;           // train/pictures/run_pictures.h
  int64_t histogram_every = 0;  // epochs; 0: none
  bool report = true;           // report.html
  int64_t profile_steps = 0;    // steps recorded by the profiler (train/profile_window.h); 0: off
  int64_t profile_warmup = 5;   // steps of the run before them
};

struct TrainSettings {
  ComputeSettings compute;
  RunSettings run;
  DataSettings data;
  AugmentSettings augment;
  ModelSettings model;
  OptimSettings optim;
  LossSettings loss;
  PrecisionSettings precision;
  LoopSettings loop;
  CheckpointSettings checkpoint;
  EmaSettings ema;  // [ema]
  SwaSettings swa;  // [swa] (its learning rate: optim.schedule)
  LogSettings log;
  DistributedSettings distributed;
  std::string resolved_ini;  // Config::to_ini(): written to config.ini and into every checkpoint
};

// data.batch_size, train.seed, data.image_size, precision.mode and train.accumulate of `config`,
// the integers as numbers (so that "032" and "32" are the same).
std::vector<ResumeKey> resume_keys(const Config& config);

// Reads every key the trainer uses; a cnn::Error (with the key's file:line) for combinations that
// cannot mean what they say. In a job of several ranks (`world`), device = cuda means
// cuda:<local rank>, each rank's loader takes its shard, and the linear scaling rule counts the
// global batch (batch size x accumulate x world size).
TrainSettings from_config(const Config& config, const distributed::World& world = {});

// The backend's process-wide switches from `compute`: the CUDA device, the CPU threads and
// convolutions, cuDNN's algorithm choice, TF32 math.
void configure_backend(const ComputeSettings& compute);

// A warning for settings that run but run far slower than they need to, or "": fp16 on the CPU,
// whose convolutions only the reference path computes (oneDNN is given f32 and bf16 alone; the
// compact CNN's step took about 30 times as long as in fp32), where bf16 is the CPU's mixed precision.
std::string precision_advice(const TrainSettings& settings);

}  // namespace cnn::train
