#include "train/trainer.h"

#include <omp.h>

#include <chrono>
#include <cmath>
#include <ctime>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "data/batch_augment.h"
#include "data/loader.h"
#include "data/open_dataset.h"
#include "data/randaugment.h"
#include "data/transforms.h"
#include "engine/cnn.h"
#include "layers/registry.h"
#include "layers/weights.h"
#include "train/checkpoint.h"
#include "train/eval_support.h"
#include "train/log/console.h"
#include "train/log/metrics_jsonl.h"
#include "train/log/tensorboard.h"
#include "train/loss_scaler.h"
#include "train/optim/adamw.h"
#include "train/optim/grad_norm.h"
#include "train/optim/param_groups.h"
#include "train/optim/sgd.h"
#include "train/schedule/lr_schedule.h"

namespace cnn::train {

namespace {
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

std::string timestamp(const char* format) {
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  std::ostringstream out;
  out << std::put_time(&local, format);
  return out.str();
}

// Everything the console shows goes to train.log too, with a timestamp per line.
class RunLog {
 public:
  RunLog(Console& console, const std::filesystem::path& file) : console_(console), file_(file, std::ios::app) {}
  void summary(const std::string& m) { console_.summary(m); write(m); }
  void info(const std::string& m) { console_.info(m); write(m); }
  void warn(const std::string& m) { console_.warn(m); write("warning: " + m); }
  void progress(int64_t epoch, int64_t step, int64_t steps, const std::vector<std::pair<std::string, double>>& numbers,
                bool log_line) {
    console_.progress(epoch, step, steps, numbers);
    if (!log_line) return;
    std::ostringstream line;
    line << "epoch " << epoch << " step " << step << "/" << steps;
    for (const auto& [k, v] : numbers) line << "  " << k << " " << std::setprecision(4) << v;
    write(line.str());
  }

 private:
  void write(const std::string& m) {
    file_ << "[" << timestamp("%Y-%m-%d %H:%M:%S") << "] " << m << "\n";
    file_.flush();
  }
  Console& console_;
  std::ofstream file_;
};

// Combinations that cannot mean what they say are refused before any work.
void refuse_contradictions(const Config& c) {
  CNN_CHECK(!(c.boolean("augment.on_gpu") && c.real("augment.random_erasing") > 0), c.origin("augment.random_erasing"),
            ": augment.random_erasing works on normalised images, which with augment.on_gpu = true only exist on the ",
            "device; set on_gpu = false to use random erasing");
  CNN_CHECK(!(c.boolean("augment.random_resized_crop") && c.integer("augment.crop_padding") > 0),
            c.origin("augment.crop_padding"), ": augment.crop_padding applies to the plain random crop; with ",
            "random_resized_crop = true it would be ignored: set one of them back");
}

ModelOptions model_options(const Config& c) {
  return {.dropout = c.optional_real("model.dropout"),
          .drop_path = c.optional_real("model.drop_path"),
          .zero_init_residual = c.boolean("model.zero_init_residual")};
}

// The dataset spec of data/open_dataset.h for a [data] path and split.
std::string dataset_spec(const Config& c, const std::string& path, bool train) {
  const std::string format = c.text("data.format");
  if (format == "idx") {  // Fashion-MNIST's folder gets its class names; other IDX data numbered classes
    const bool fashion = path.find("fashion") != std::string::npos;
    return (fashion ? "fashion-mnist:" : "mnist:") + path + (train ? ":train" : ":test");
  }
  if (format == "cifar")
    return (c.integer("model.num_classes") == 100 ? "cifar100:" : "cifar10:") + path + (train ? ":train" : ":test");
  return path;  // folder (a directory), packed (.h5) or list files are recognised by open_dataset
}

// The loader's training transforms, in torchvision's order: crop (random resized, or resize + centre
// crop + padded random crop), flip, colour jitter, RandAugment, normalisation, random erasing. With
// augment.on_gpu the pipeline stops at uint8 after the colour transforms and BatchCropFlip does the
// padded crop, the flip and the normalisation on the training device (after RandAugment, then).
data::Pipeline train_pipeline(const Config& c, int channels) {
  const int size = static_cast<int>(c.integer("data.image_size"));
  const bool on_device = c.boolean("augment.on_gpu");
  std::vector<data::TransformPtr> t;
  const double flip = on_device ? 0.0 : c.real("augment.hflip");
  const bool crop_resized = c.boolean("augment.random_resized_crop");
  if (crop_resized) {  // the flip, if any, in the same resampling pass
    t.push_back(std::make_shared<data::RandomResizedCrop>(size, size, std::array<double, 2>{c.real("augment.scale_min"), 1.0},
                                                          std::array<double, 2>{c.real("augment.ratio_min"), c.real("augment.ratio_max")},
                                                          flip));
  } else {
    t.push_back(std::make_shared<data::Resize>(size));
    t.push_back(std::make_shared<data::CenterCrop>(size, size));
    const int padding = static_cast<int>(c.integer("augment.crop_padding"));
    if (padding > 0 && !on_device) t.push_back(std::make_shared<data::RandomCrop>(size, size, padding));
  }
  if (flip > 0 && !crop_resized) t.push_back(std::make_shared<data::RandomHorizontalFlip>(flip));
  const float jitter = static_cast<float>(c.real("augment.color_jitter"));
  if (jitter > 0) t.push_back(std::make_shared<data::ColorJitter>(jitter, jitter, jitter, 0.0f));
  const int randaugment_ops = static_cast<int>(c.integer("augment.randaugment_ops"));
  if (randaugment_ops > 0)
    t.push_back(std::make_shared<data::RandAugment>(randaugment_ops, static_cast<int>(c.integer("augment.randaugment_magnitude"))));
  data::Pipeline pipeline(t, size, size, channels, normalize_of(c, channels));
  if (c.real("augment.random_erasing") > 0) pipeline.set_random_erasing(data::RandomErasing{c.real("augment.random_erasing")});
  return pipeline;
}

// augment.on_gpu: the random crop of the padded image, the flip and the normalisation of a uint8
// batch, on the device the batch is on. Sample n of the batch draws with key (seed, epoch,
// first_sample + n), so a resumed run draws what the uninterrupted one would have.
class BatchCropFlip {
 public:
  BatchCropFlip(const Config& c, int channels, DType dtype)
      : normalize_(normalize_of(c, channels)), dtype_(dtype), seed_(static_cast<uint64_t>(c.integer("train.seed"))) {
    const int size = static_cast<int>(c.integer("data.image_size"));
    options_.height = options_.width = size;
    options_.padding = c.boolean("augment.random_resized_crop") ? 0 : static_cast<int>(c.integer("augment.crop_padding"));
    options_.random_crop = true;
    options_.flip_probability = c.real("augment.hflip");
  }
  Tensor operator()(const Tensor& images, int64_t epoch, int64_t first_sample) const {
    return data::crop_flip_normalize(images, options_, normalize_, dtype_, seed_, static_cast<uint64_t>(epoch),
                                     static_cast<uint64_t>(first_sample));
  }

 private:
  data::CropFlipOptions options_;
  data::Normalize normalize_;
  DType dtype_;
  uint64_t seed_;
};

struct Validation {
  double loss = 0, top1 = 0, top5 = 0;
  std::vector<int64_t> confusion;  // [truth * classes + predicted]
};

Validation validate(Module& model, data::Loader& loader, int64_t classes, const Device& device, int64_t epoch) {
  NoGrad no_grad;
  model.eval();
  Validation v;
  v.confusion.assign(static_cast<size_t>(classes * classes), 0);
  double loss_sum = 0;
  int64_t seen = 0, top1 = 0, top5 = 0;
  loader.start_epoch(epoch);
  while (auto batch = loader.next()) {
    if (batch->size() == 0) continue;
    const Tensor logits = model.forward(batch->images.to(device)).to(DType::f32);
    const Tensor labels = batch->labels.to(device);
    loss_sum += cross_entropy(logits, labels).item() * static_cast<double>(batch->size());
    const std::vector<double> scores = logits.to_doubles(), truth = batch->labels.to_doubles();
    for (int64_t i = 0; i < batch->size(); ++i) {
      const double* row = scores.data() + i * classes;
      const int64_t label = static_cast<int64_t>(truth[static_cast<size_t>(i)]);
      int64_t higher = 0, best = 0;
      for (int64_t k = 0; k < classes; ++k) {
        if (row[k] > row[label]) ++higher;
        if (row[k] > row[best]) best = k;
      }
      top1 += higher == 0;
      top5 += higher < 5;
      ++v.confusion[static_cast<size_t>(label * classes + best)];
    }
    seen += batch->size();
  }
  model.train();
  if (seen) {
    v.loss = loss_sum / static_cast<double>(seen);
    v.top1 = 100.0 * static_cast<double>(top1) / static_cast<double>(seen);
    v.top5 = 100.0 * static_cast<double>(top5) / static_cast<double>(seen);
  }
  return v;
}

void write_confusion(const std::filesystem::path& path, const Validation& v, const std::vector<std::string>& names,
                     int64_t epoch) {
  const int64_t k = static_cast<int64_t>(names.size());
  nlohmann::json matrix = nlohmann::json::array(), per_class = nlohmann::json::object();
  for (int64_t t = 0; t < k; ++t) {
    nlohmann::json row = nlohmann::json::array();
    int64_t total = 0;
    for (int64_t p = 0; p < k; ++p) {
      row.push_back(v.confusion[static_cast<size_t>(t * k + p)]);
      total += v.confusion[static_cast<size_t>(t * k + p)];
    }
    matrix.push_back(row);
    per_class[names[static_cast<size_t>(t)]] =
        total ? 100.0 * static_cast<double>(v.confusion[static_cast<size_t>(t * k + t)]) / static_cast<double>(total) : 0.0;
  }
  const nlohmann::json doc = {{"epoch", epoch},          {"loss", v.loss},           {"top1", v.top1},
                              {"top5", v.top5},          {"classes", names},         {"per_class_top1", per_class},
                              {"confusion_matrix_rows_truth_columns_predicted", matrix}};
  std::ofstream(path) << doc.dump(1) << "\n";
}

// resume = auto: the newest <dir>/<timestamp>_<name> folder that holds a last.h5 ("" when none).
std::filesystem::path latest_run_with_checkpoint(const std::filesystem::path& dir, const std::string& name) {
  std::filesystem::path best;
  if (!std::filesystem::is_directory(dir)) return best;
  const std::string suffix = "_" + name;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string folder = entry.path().filename().string();
    const bool named = folder.size() > suffix.size() && folder.compare(folder.size() - suffix.size(), suffix.size(), suffix) == 0;
    if (named && std::filesystem::exists(last_checkpoint_path(entry.path())) && (best.empty() || entry.path() > best))
      best = entry.path();
  }
  return best;
}

std::string format_seconds(double s) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(1) << s << " s";
  return out.str();
}
}  // namespace

TrainSummary run_training(const Config& c, const TrainRunOptions& options) {
  refuse_contradictions(c);
  std::ostream& out = options.console ? *options.console : std::cout;
  const Device device = Device::parse(c.text("train.device"));
  if (device.is_cuda()) cuda::require_device(device.index);
  if (c.integer("train.threads") > 0) omp_set_num_threads(static_cast<int>(c.integer("train.threads")));
  cuda::set_cudnn_benchmark(c.boolean("train.cudnn_benchmark"));
  // The CPU backend and the project's CUDA kernels are deterministic for a given thread count; on a
  // GPU, cuDNN must also be kept to its deterministic algorithms.
  cuda::set_cudnn_deterministic(c.boolean("train.deterministic"));
  const uint64_t seed = static_cast<uint64_t>(c.integer("train.seed"));

  // ---- run folder ----
  std::string name = c.text("run.name");
  if (name.empty()) name = c.source().empty() ? "run" : std::filesystem::path(c.source()).stem().string();
  std::string resume = options.resume.empty() ? c.text("checkpoint.resume") : options.resume;
  std::filesystem::path run_dir;
  if (!resume.empty() && resume != "auto") {
    const std::filesystem::path r(resume);
    run_dir = std::filesystem::is_directory(r) ? r : r.parent_path();
  } else if (resume == "auto") {
    run_dir = latest_run_with_checkpoint(c.text("run.dir"), name);
  }
  if (run_dir.empty()) run_dir = std::filesystem::path(c.text("run.dir")) / (timestamp("%Y%m%d_%H%M%S") + "_" + name);
  std::filesystem::create_directories(run_dir);
  std::filesystem::path resume_file;
  if (!resume.empty())
    resume_file = std::filesystem::is_directory(resume) ? last_checkpoint_path(resume) : resolve_resume(resume, run_dir);
  CNN_CHECK(resume_file.empty() || std::filesystem::exists(resume_file), "cannot resume from ", resume, ": ",
            resume_file.string(), " does not exist (a run folder holds last.h5 once an epoch has finished)");

  Console console(out, parse_log_level(c.text("log.level")), parse_progress_mode(c.text("log.progress")),
                  stdout_is_terminal() && !options.console, c.integer("log.every_steps"));
  RunLog log(console, run_dir / "train.log");
  std::ofstream(run_dir / "config.ini") << c.to_ini();

  // ---- data ----
  const int channels = static_cast<int>(c.integer("model.in_channels"));
  CNN_CHECK(!c.text("data.path").empty(), c.origin("data.path"), ": [data] path is empty; set it to the training data");
  const data::DatasetPtr train_set = data::open_dataset(dataset_spec(c, c.text("data.path"), true));
  const int64_t classes = c.integer("model.num_classes");
  int64_t max_label = -1;
  for (int64_t i = 0; i < train_set->size(); ++i) max_label = std::max(max_label, train_set->label(i));
  CNN_CHECK(max_label < classes, "the training data has labels up to ", max_label, " but [model] num_classes is ", classes,
            " (", c.origin("model.num_classes"), "); set num_classes to at least ", max_label + 1);
  std::vector<std::string> class_names = train_set->class_names();
  class_names.resize(std::min<size_t>(class_names.size(), static_cast<size_t>(classes)));
  while (static_cast<int64_t>(class_names.size()) < classes) class_names.push_back(std::to_string(class_names.size()));
  {
    std::ofstream names(run_dir / "classes.txt");
    for (const std::string& n : class_names) names << n << "\n";
  }
  const DType compute = c.text("precision.mode") == "fp16" ? DType::f16 : c.text("precision.mode") == "bf16" ? DType::bf16 : DType::f32;
  data::LoaderOptions lo;
  lo.batch_size = c.integer("data.batch_size");
  lo.workers = static_cast<int>(c.integer("data.workers"));
  lo.prefetch = static_cast<int>(c.integer("data.prefetch") * std::max<int64_t>(1, c.integer("data.workers")));
  lo.shuffle = true;
  lo.seed = seed;
  lo.drop_last = c.boolean("data.drop_last");
  const bool augment_on_device = c.boolean("augment.on_gpu");
  lo.dtype = augment_on_device ? DType::u8 : compute;
  lo.device = device;
  lo.log = [&log](const std::string& m) { log.warn(m); };
  data::Loader train_loader(train_set, train_pipeline(c, channels), lo);
  const BatchCropFlip batch_crop_flip(c, channels, compute);
  std::unique_ptr<data::Loader> val_loader;
  if (!c.text("data.val_path").empty()) {
    data::LoaderOptions vo = lo;
    vo.dtype = compute;
    vo.shuffle = false;
    vo.drop_last = false;
    val_loader = std::make_unique<data::Loader>(data::open_dataset(dataset_spec(c, c.text("data.val_path"), false)),
                                                eval_pipeline(c, channels), vo);
  }
  const int64_t batches_per_epoch = train_loader.steps_per_epoch();
  const int64_t accumulate = c.integer("train.accumulate");
  const int64_t steps_per_epoch = std::max<int64_t>(1, batches_per_epoch / accumulate);
  CNN_CHECK(batches_per_epoch > 0, "the training data (", train_set->size(), " samples) makes no batch of ",
            lo.batch_size, "; lower data.batch_size or set data.drop_last = false");

  // ---- model ----
  std::unique_ptr<Module> model = make_model(c.text("model.name"), static_cast<int>(classes), channels, seed, model_options(c));
  if (!c.text("model.pretrained").empty()) {
    const WeightsReport r = load_weights(*model, c.text("model.pretrained"), !c.boolean("model.pretrained_head"));
    log.info("pretrained weights " + c.text("model.pretrained") + ": " + r.summary());
  }
  model->to(device);
  if (compute != DType::f32) model->to(compute);
  model->set_gradient_checkpointing(c.text("train.checkpointing") == "blocks");
  model->train();

  // ---- optimisation ----
  ParamGroupOptions go;
  go.weight_decay = c.real("optim.weight_decay");
  go.no_decay_1d = c.boolean("optim.no_decay_bn_bias");
  go.head_prefix = c.text("optim.head");
  go.head_lr_mult = c.real("optim.head_lr_mult");
  std::vector<ParamGroup> groups = make_param_groups(as_named(model->named_parameters()), go);
  std::unique_ptr<Optimizer> optimizer;
  if (c.text("optim.name") == "adamw")
    optimizer = std::make_unique<AdamW>(groups, AdamWOptions{c.real("optim.beta1"), c.real("optim.beta2"), c.real("optim.eps")});
  else
    optimizer = std::make_unique<SGD>(groups, SgdOptions{c.real("optim.momentum"), c.boolean("optim.nesterov")});
  const std::vector<std::string> frozen = c.texts("optim.freeze");
  if (!frozen.empty()) optimizer->set_frozen(frozen, true);
  LrSchedule schedule(schedule_options(c, steps_per_epoch, lo.batch_size * accumulate));
  LossScaler scaler(loss_scaler_options(c));
  const bool fp16 = compute == DType::f16;
  const double clip = c.real("optim.clip_grad_norm");
  const double smoothing = c.real("train.label_smoothing");
  const bool mixing = c.real("train.mixup") > 0 || c.real("train.cutmix") > 0;
  data::MixOptions mix;
  mix.mixup_alpha = c.real("train.mixup");
  mix.cutmix_alpha = c.real("train.cutmix");
  mix.probability = c.real("train.mix_prob");
  mix.label_smoothing = smoothing;

  // ---- resume ----
  int64_t start_epoch = 0, step = 0;
  double best_metric = std::nan("");
  if (!resume_file.empty()) {
    const TrainingState s = load_checkpoint(resume_file);
    restore_tensors(s.params, as_named(model->named_parameters()), resume_file.string());
    restore_tensors(s.buffers, as_named(model->named_buffers()), resume_file.string());
    optimizer->load_state(s.optimizer);
    schedule.load_state(s.lr_schedule);
    if (!s.loss_scaler.empty()) scaler.load_state(s.loss_scaler);
    start_epoch = s.epoch;
    step = s.step;
    best_metric = s.best_metric;
    log.info("resumed from " + resume_file.string() + " after epoch " + std::to_string(s.epoch) + ", step " +
             std::to_string(s.step));
  }
  const bool best_is_loss = c.text("checkpoint.best_metric") == "val_loss";
  auto save_state = [&](const std::filesystem::path& path, int64_t epochs_done) {
    // A finite loss does not prove finite weights (a backward pass can overflow): never replace a
    // good checkpoint with broken weights.
    CNN_CHECK(unscale_and_measure(model->parameters(), 1.0).finite(), "the weights hold inf/nan after step ", step,
              "; training stopped. The last good checkpoint is ", last_checkpoint_path(run_dir).string(),
              "; lower the learning rate or enable gradient clipping");
    TrainingState s;
    s.params = as_named(model->named_parameters());
    s.buffers = as_named(model->named_buffers());
    s.optimizer = optimizer->state();
    s.epoch = epochs_done;
    s.step = step;
    s.seed = seed;
    s.best_metric = best_metric;
    s.lr_schedule = schedule.state();
    s.loss_scaler = scaler.state();
    s.config = c.to_ini();
    s.class_names = class_names;
    save_checkpoint(path, s);
  };

  // An fp32/bf16 loss that is not finite stops the run with the last good checkpoint in place (the
  // mean loss is checked at logged steps, before every checkpoint, and at the end of each epoch).
  // With fp16 the loss scaler skips overflowing steps instead.
  auto stop_unless_finite = [&](double mean_loss, int64_t epoch) {
    CNN_CHECK(std::isfinite(mean_loss) || fp16, "the training loss became ", mean_loss, " at step ", step, " (epoch ",
              epoch + 1, "); training stopped. The last good checkpoint is ", last_checkpoint_path(run_dir).string(),
              "; lower the learning rate or enable gradient clipping");
  };
  std::unique_ptr<MetricsJsonl> metrics;
  if (c.boolean("log.jsonl")) metrics = std::make_unique<MetricsJsonl>(run_dir / "metrics.jsonl");
  std::unique_ptr<EventWriter> events;
  if (c.boolean("log.tensorboard")) events = std::make_unique<EventWriter>(run_dir);
  auto scalar = [&](const std::string& tag, double value) {
    if (events) events->add_scalar(tag, value, step);
  };

  log.info("cnn_train: " + c.text("model.name") + " (" + std::to_string(model->parameter_count()) + " parameters) on " +
           device.str() + ", " + c.text("precision.mode") + "; " + std::to_string(train_set->size()) + " training images, " +
           std::to_string(batches_per_epoch) + " batches of " + std::to_string(lo.batch_size) + " per epoch; run folder " +
           run_dir.string());

  TrainSummary summary;
  summary.run_dir = run_dir;
  const int64_t epochs = c.integer("train.epochs"), max_steps = c.integer("train.max_steps");
  const int64_t log_every = c.integer("log.every_steps");
  const auto run_start = Clock::now();
  double wait_total = 0, compute_total = 0;
  int64_t images_total = 0;
  int64_t skipped_in_a_row = 0;
  bool stop = false;

  for (int64_t epoch = start_epoch; epoch < epochs && !stop; ++epoch) {
    const int64_t unfreeze = c.integer("optim.unfreeze_epoch");
    if (!frozen.empty() && unfreeze >= 0 && epoch >= unfreeze) optimizer->set_frozen(frozen, false);
    // Batches used so far in this epoch (not 0 when resuming from a mid-epoch checkpoint). An epoch
    // makes steps_per_epoch optimizer steps of `accumulate` batches each.
    const int64_t first_batch = (step - epoch * steps_per_epoch) * accumulate;
    train_loader.start_epoch(epoch, std::max<int64_t>(0, first_batch));
    optimizer->zero_grad();  // micro-batches left over at the end of the last epoch never stepped
    const auto epoch_start = Clock::now();
    int64_t epoch_images = 0, micro = 0, batch_index = std::max<int64_t>(0, first_batch);
    Tensor loss_sum = Tensor::zeros({}, DType::f32, device);
    double shown_loss = std::nan("");
    auto last_loss_read = Clock::now() - std::chrono::seconds(10);
    while (auto batch = train_loader.next()) {
      const int64_t batch_size = batch->size();
      ++batch_index;
      if (batch_size == 0) continue;
      // Dropout and drop-path masks keyed by (epoch, batch): a resumed run draws what this batch would have.
      model->reseed(derive_seed(derive_seed(seed, static_cast<uint64_t>(epoch)), static_cast<uint64_t>(batch_index)));
      Tensor x = batch->images.to(device);
      if (augment_on_device) x = batch_crop_flip(x, epoch, (batch_index - 1) * lo.batch_size);
      const Tensor labels = batch->labels.to(device);
      Tape tape;
      Tensor loss;
      {
        Tape::Recording rec(tape);
        Tensor targets;
        if (mixing) targets = data::mix_batch(x, labels, classes, mix, seed, static_cast<uint64_t>(epoch),
                                              static_cast<uint64_t>(batch_index)).targets;
        const Tensor logits = model->forward(x).to(DType::f32);
        loss = mixing ? cross_entropy_soft(logits, targets) : cross_entropy(logits, labels, smoothing);
      }
      const double loss_scale = fp16 ? scaler.scale() : 1.0;
      tape.backward(loss, Tensor::full({}, loss_scale / static_cast<double>(accumulate), DType::f32, device));
      {
        NoGrad no_grad;
        add_(loss_sum, loss.detach());
      }
      if (options.record_step_losses) summary.step_losses.push_back(loss.item());
      epoch_images += batch_size;
      if (++micro % accumulate != 0) continue;

      // ---- optimizer step ----
      const std::vector<Tensor> grads = optimizer->gradients();
      bool do_step = true;
      double coefficient = 1.0;
      if (fp16) {
        const GradientStats stats = scaler.unscale(grads);
        do_step = scaler.update(stats);
        if (do_step && clip > 0) coefficient = clip_coefficient(stats.norm, clip);
      } else if (clip > 0) {
        const GradientStats stats = unscale_and_measure(grads, 1.0);
        if (!stats.finite()) stop_unless_finite(std::nan(""), epoch);  // clipping would spread the nan to all
        coefficient = clip_coefficient(stats.norm, clip);
      }
      if (do_step) {
        optimizer->step(schedule.lr(step), coefficient);
        skipped_in_a_row = 0;
      } else {
        ++summary.skipped_steps;
        log.warn("step " + std::to_string(step) + ": inf/nan gradients at loss scale " + std::to_string(loss_scale) +
                 "; step skipped, scale lowered to " + std::to_string(scaler.scale()));
        CNN_CHECK(++skipped_in_a_row < 20, "20 optimizer steps in a row had inf/nan gradients; training stopped. ",
                  "The last good checkpoint is ", last_checkpoint_path(run_dir).string(), "; lower the learning rate");
      }
      optimizer->zero_grad();
      ++step;

      // ---- logging ----
      const bool log_now = step % log_every == 0;
      // Reading the loss waits for the device: the progress bar redraws every step but reads a fresh
      // loss at most once a second (and at logged steps), so the GPU is not synchronised each step.
      const bool refresh_loss = log_now || seconds_since(last_loss_read) >= 1.0;
      if (log_now || console.draws_bar()) {
        if (refresh_loss) {
          shown_loss = loss_sum.item() / static_cast<double>(micro);
          last_loss_read = Clock::now();
        }
        const double mean_loss = shown_loss;
        stop_unless_finite(mean_loss, epoch);
        const data::EpochStats ls = train_loader.stats();
        const double elapsed = seconds_since(epoch_start);
        std::vector<std::pair<std::string, double>> numbers = {
            {"loss", mean_loss}, {"img/s", epoch_images / std::max(elapsed, 1e-9)}, {"wait%", 100 * ls.wait_fraction()}};
        log.progress(epoch + 1, batch_index, batches_per_epoch, numbers, log_now);
        if (log_now) {
          std::map<std::string, double> m = {{"train_loss", mean_loss}, {"lr", schedule.lr(step)},
                                             {"images_per_second", numbers[1].second}, {"data_wait", ls.wait_fraction()}};
          if (fp16) m["loss_scale"] = scaler.scale();
          if (device.is_cuda()) m["gpu_memory_bytes"] = static_cast<double>(cuda_allocator(device.index).stats().in_use);
          if (metrics) metrics->write(step, epoch, m);
          for (const auto& [k, v] : m) scalar("train/" + k, v);
        }
      }
      const int64_t every_steps = c.integer("checkpoint.every_steps");
      if (every_steps > 0 && step % every_steps == 0) {
        stop_unless_finite(loss_sum.item() / static_cast<double>(micro), epoch);  // never checkpoint NaN weights
        save_state(last_checkpoint_path(run_dir), epoch);
      }
      if (max_steps > 0 && step >= max_steps) {
        stop = true;
        break;
      }
    }

    // ---- end of epoch ----
    const data::EpochStats ls = train_loader.stats();
    const double epoch_seconds = seconds_since(epoch_start);
    wait_total += ls.wait_seconds;
    compute_total += ls.compute_seconds;
    images_total += epoch_images;
    const double train_loss = micro ? loss_sum.item() / static_cast<double>(micro) : 0.0;
    stop_unless_finite(train_loss, epoch);  // before this epoch's checkpoint could replace the last good one
    std::ostringstream line;
    line << std::fixed << std::setprecision(4) << "epoch " << epoch + 1 << "/" << epochs << ": train loss " << train_loss
         << std::setprecision(1) << ", " << epoch_images / std::max(epoch_seconds, 1e-9) << " img/s, data wait "
         << 100 * ls.wait_fraction() << "%";
    if (ls.skipped) line << ", " << ls.skipped << " corrupt images skipped";
    std::map<std::string, double> m = {{"train_loss", train_loss}, {"epoch_seconds", epoch_seconds}};
    const bool validate_now = val_loader && ((epoch + 1) % c.integer("train.eval_every") == 0 || epoch + 1 == epochs || stop);
    bool improved = false;
    if (validate_now) {
      const Validation v = validate(*model, *val_loader, classes, device, epoch);
      line << std::setprecision(4) << "; val loss " << v.loss << std::setprecision(2) << ", top-1 " << v.top1 << "%, top-5 "
           << v.top5 << "%";
      m["val_loss"] = v.loss;
      m["val_top1"] = v.top1;
      m["val_top5"] = v.top5;
      write_confusion(run_dir / "confusion.json", v, class_names, epoch + 1);
      summary.last_top1 = v.top1;
      summary.last_val_loss = v.loss;
      const double metric = best_is_loss ? v.loss : v.top1;
      improved = std::isnan(best_metric) || (best_is_loss ? metric < best_metric : metric > best_metric);
      if (improved) best_metric = metric;
      if (v.top1 > summary.best_top1) {
        summary.best_top1 = v.top1;
        summary.best_epoch = epoch + 1;
      }
      schedule.observe(c.text("schedule.plateau_metric") == "val_top1" ? v.top1 : v.loss);
    }
    log.summary(line.str());
    if (metrics) metrics->write(step, epoch, m, {{"kind", "epoch"}});
    for (const auto& [k, v] : m) scalar("epoch/" + k, v);
    if (events) events->flush();
    const int64_t every = c.integer("checkpoint.every_epochs");
    // A max_steps stop inside the epoch leaves it unfinished: a resume continues it from `step`.
    const int64_t epochs_done = stop && batch_index < batches_per_epoch ? epoch : epoch + 1;
    if ((every > 0 && (epoch + 1) % every == 0) || epoch + 1 == epochs || stop) save_state(last_checkpoint_path(run_dir), epochs_done);
    if (improved && c.boolean("checkpoint.save_best")) save_state(best_checkpoint_path(run_dir), epochs_done);
    summary.epochs_run = epoch + 1 - start_epoch;
  }

  if (c.boolean("checkpoint.export_safetensors")) save_weights(*model, run_dir / "model.safetensors");
  summary.steps = step;
  summary.seconds = seconds_since(run_start);
  summary.images_per_second = images_total / std::max(summary.seconds, 1e-9);
  summary.data_wait_share = wait_total + compute_total > 0 ? wait_total / (wait_total + compute_total) : 0;
  std::ostringstream done;
  done << std::fixed << std::setprecision(2) << "done: ";
  if (summary.best_top1 >= 0) done << "best val top-1 " << summary.best_top1 << "% at epoch " << summary.best_epoch << ", ";
  done << "total " << format_seconds(summary.seconds) << ", " << std::setprecision(1) << summary.images_per_second
       << " img/s, data wait " << 100 * summary.data_wait_share << "%; run folder " << run_dir.string();
  log.summary(done.str());
  return summary;
}

}  // namespace cnn::train
