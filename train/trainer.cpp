// The training loop (see trainer.h). run_training reads top-down: the settings, the run folder, a
// resumed checkpoint's checks (resume.h), the data, the learner (restored when resuming), then the
// epochs; the Trainer below runs them: each epoch's micro-batches and optimizer steps
// (train_step.cpp), logging after a step, the end of an epoch (validation, checkpoints, the epoch
// line) and the final summary.
#include "train/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iomanip>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>

#include "engine/byte_size.h"
#include "engine/cnn.h"
#include "engine/profiler.h"
#include "layers/weights.h"
#include "train/checkpoint.h"
#include "train/corrupt_images.h"
#include "train/distributed/data_parallel.h"
#include "train/divergence.h"
#include "train/interrupt.h"
#include "train/memory_estimate.h"
#include "train/pictures/report_html.h"
#include "train/pictures/run_pictures.h"
#include "train/profile_report.h"
#include "train/profile_window.h"
#include "train/log/progress_format.h"
#include "train/learner.h"
#include "train/log/console.h"
#include "train/resume.h"
#include "train/run_folder.h"
#include "train/run_log.h"
#include "train/step_graph.h"
#include "train/train_settings.h"
#include "train/train_step.h"
#include "train/training_data.h"
#include "train/update_bn.h"
#include "train/validation.h"
#include "train/weight_average.h"

namespace cnn::train {

namespace {
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

std::string format_seconds(double seconds) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(1) << seconds << " s";
  return out.str();
}

BestValidation best_validation(const Validation& v, int64_t epoch, Weights weights) {
  return {.epoch = epoch, .weights = weights_name(weights), .top1 = v.top1, .top5 = v.top5, .loss = v.loss};
}

// One epoch as it runs: where it stands, and its running totals.
struct EpochProgress {
  int64_t epoch = 0;  // 0-based
  Clock::time_point start;
  int64_t batches_done = 0;   // batches of the epoch used (those before a mid-epoch resume included)
  int64_t batches_in_epoch = 0;  // of this rank in this epoch's plan
  // Samples of the epoch's order that all ranks together used before this run of the epoch started,
  // when a checkpoint of another number of ranks is resumed (then batches count from there).
  int64_t skipped_samples = 0;
  int64_t micro_batches = 0;  // micro-batches trained in this run of the epoch
  int64_t batches_at_step = 0;  // batches_done after the last optimizer step (or at the start)
  int64_t images = 0;
  Tensor loss_sum;  // of the micro-batches' losses, on the training device (read back only to show it)
  // The shown loss is the mean over the micro-batches since the last read (smoothed, and the device
  // is waited for only then).
  double shown_loss = std::nan("");
  double loss_sum_at_read = 0;
  int64_t micro_batches_at_read = 0;
  Clock::time_point last_loss_read;
  Clock::time_point last_step;     // for the moving average of step time (the ETAs)
  double step_seconds = std::nan("");
  bool reached_max_steps = false;
  bool interrupted = false;  // Ctrl-C / SIGTERM: stopped after a step (or while waiting for data)
  double mean_loss() const { return loss_sum.item() / static_cast<double>(micro_batches); }
  // Reads the loss sum: the mean over the micro-batches since the last read.
  void read_loss() {
    const double sum = loss_sum.item();
    if (micro_batches > micro_batches_at_read)
      shown_loss = (sum - loss_sum_at_read) / static_cast<double>(micro_batches - micro_batches_at_read);
    loss_sum_at_read = sum;
    micro_batches_at_read = micro_batches;
    last_loss_read = Clock::now();
  }
};

// The epochs of a run over the pieces run_training built.
class Trainer {
 public:
  Trainer(const TrainSettings& settings, const TrainRunOptions& options, const RunFolder& folder, Console& console, RunLog& log,
          RunMetrics& metrics, TrainingData& data, Learner& learner, RunProgress progress, DataParallel& data_parallel)
      : settings_(settings), options_(options), folder_(folder), console_(console), log_(log), metrics_(metrics), data_(data),
        learner_(learner), progress_(progress), saved_position_(progress), data_parallel_(data_parallel), world_size_(data_parallel.world().world_size),
        first_epoch_(progress.epochs_done), guard_(log, folder.last_checkpoint(), settings.precision.fp16()),
        pictures_(settings, folder.dir, metrics.events(), data.class_names, settings.log.images && data_parallel.world().is_main()) {
    summary_.run_dir = folder.dir;
    if (settings.loop.graphs) start_step_graph();
    last_readout_ = learner.scaler.read();
    guard_.resume_from(last_readout_);
    if (progress.step > 0 && progress.world_size != world_size_) {
      // Steps of another number of ranks: counted anew in steps of this run's global batch, so that
      // the schedule stands where the same number of samples puts it.
      progress_.step = steps_on_ranks(progress.step, progress.world_size, world_size_);
      log.info("the checkpoint was written by " + std::to_string(progress.world_size) + " ranks, this run has " +
               std::to_string(world_size_) + ": its step " + std::to_string(progress.step) + " counts as step " +
               std::to_string(progress_.step) + " here (the same number of samples)");
    }
  }
  TrainSummary run();

 private:
  struct EpochStart {
    int64_t first_batch = 0, skipped_samples = 0;
  };
  EpochStart epoch_start(int64_t epoch) const;
  EpochProgress train_epoch(int64_t epoch);
  StepFigures step_figures(const EpochProgress& epoch) const;
  bool stop_requested();  // at logged steps in a data-parallel run (stop_agreed there)
  bool stop_agreed();     // Ctrl-C on this rank, or on any rank of a data-parallel run (a collective)
  // The resolved config of the run (--set overrides included): what a resume should be given.
  std::string config_path() const { return (folder_.dir / "config.ini").string(); }
  void after_step(EpochProgress& epoch);
  // [train] cuda_graphs: the captured step, unless the run cannot have one (the log says why).
  void start_step_graph();
  // Whether this step replays the captured step (capturing it first when needed); a capture that
  // fails ends the graphs for the run, with the reason in the log.
  bool step_on_graph(const MicroBatch& batch, bool hooked);
  // Reads the step's verdicts back from the device (train/loss_scaler.h) into last_readout_ and
  // the divergence guard: after every step on the CPU (free), at logged steps, step checkpoints and
  // epoch ends on a GPU (a synchronisation, so not in every step).
  void read_verdicts();
  // Whether the run stops after this epoch (Ctrl-C during its validation).
  bool end_epoch(const EpochProgress& epoch);
  // The live weights' validation of an epoch, and whether it improved the best metric; nothing when
  // Ctrl-C stopped it (the figures of part of the set are not reported).
  struct EpochValidation {
    Validation live;
    bool improved = false;
  };
  std::optional<EpochValidation> validate_epoch(int64_t epoch, EpochLine& line, std::map<std::string, double>& numbers);
  Validation validate_weights(int64_t epoch, Weights weights);
  void finish_swa(int64_t epochs_done);
  Tensor next_training_images(int64_t epoch, int64_t& batches);
  // The epoch's next batch from the loader, its wait a span of the profiler (and the profiled step's start).
  std::optional<data::Batch> next_batch(const EpochProgress& epoch);
  // A batch of `epoch` on the training device (its upload a span of the profiler).
  MicroBatch micro_batch_on_device(const data::Batch& batch, const EpochProgress& epoch, bool last_of_step);
  // [log] profile_steps: after a step, and when the run ends; writes the profile when it is complete.
  void after_profiled_step();
  void write_profile_files(const profiler::Recording& recording);
  void save(const std::filesystem::path& path, int64_t epochs_done, int64_t samples_in_epoch, Weights weights = Weights::live);
  // The weights best.h5 holds (those of [checkpoint] best_metric).
  Weights best_weights() const { return settings_.checkpoint.best_of_ema ? Weights::ema : Weights::live; }
  // Samples of the epoch's order used by all ranks together so far.
  int64_t samples_used(const EpochProgress& epoch) const {
    return epoch.skipped_samples + epoch.batches_done * data_.batch_size * world_size_;
  }
  // A number every rank measured, made one for the log: the average (or the largest) over ranks.
  double across_ranks(double value, distributed::ReduceOp op) {
    return distributed::all_reduce_value(data_parallel_.comm(), value, op);
  }
  TrainSummary finish();

  const TrainSettings& settings_;
  const TrainRunOptions& options_;
  const RunFolder& folder_;
  Console& console_;
  RunLog& log_;
  RunMetrics& metrics_;
  TrainingData& data_;
  Learner& learner_;
  RunProgress progress_;
  const RunProgress saved_position_;  // as restored (samples_in_epoch, world_size)
  DataParallel& data_parallel_;
  const int64_t world_size_;
  const int64_t first_epoch_;
  DivergenceGuard guard_;
  ScalerReadout last_readout_;  // the loss scaler's control block as last read
  RunPictures pictures_;
  ProfileWindow profile_{settings_.log.profile_warmup, settings_.log.profile_steps, settings_.compute.device};
  TrainSummary summary_;
  const Clock::time_point run_start_ = Clock::now();
  double wait_seconds_ = 0, compute_seconds_ = 0;  // of the loader, over all epochs
  double validation_seconds_ = 0;
  int64_t images_ = 0;
  bool swa_finished_ = false;  // the SWA average has its BatchNorm statistics (finish_swa)
  std::unique_ptr<StepGraph> step_graph_;  // [train] cuda_graphs
  int64_t eager_steps_ = 0;  // steps of this process run eagerly (the graph waits for kGraphWarmupSteps)
};
}  // namespace

namespace {
// The run folder: rank 0 creates it (or finds the one it resumes); the other ranks only learn its
// path and the checkpoint to resume from, and write nothing there.
RunFolder open_shared_run_folder(const TrainSettings& settings, const std::string& resume, DataParallel& data_parallel) {
  RunFolder folder;
  if (data_parallel.world().is_main()) folder = open_run_folder(settings.run, resume);
  if (!data_parallel.active()) return folder;
  folder.dir = distributed::broadcast_text(data_parallel.comm(), folder.dir.string());
  folder.resume_from = distributed::broadcast_text(data_parallel.comm(), folder.resume_from.string());
  return folder;
}

// Refuses a batch far too large for the memory there is before the first step (which the system
// would otherwise end by killing the process); warns when it is close.
void check_memory(const TrainSettings& settings, const Module& model, const TrainingData& data, RunLog& log) {
  if (!settings.loop.memory_check || settings.model.gradient_checkpointing) return;
  const std::optional<AvailableMemory> available = available_memory(settings.compute.device);
  if (!available) return;
  // A batch size beyond the (sharded) training set makes one batch of the whole shard.
  const int64_t shard = data.train_set->size() / std::max<int64_t>(1, data.world_size);
  const int64_t batch = std::max<int64_t>(1, std::min(data.batch_size, shard));
  const Shape input{batch, settings.data.image_size, settings.data.image_size, settings.data.channels};
  const data::LoaderOptions& loader = settings.data.loader;
  const int64_t in_flight = (loader.prefetch > 0 ? loader.prefetch : 2 * loader.workers) + 1;  // and the step's own
  MemoryEstimate estimate = estimate_step_memory(model, input, settings.precision.compute, settings.optim.adamw ? 2 : 1, in_flight);
  if (data.validation_loader) estimate.validation = validation_record_bytes(settings.data.classes);
  const std::string warning = check_step_memory(estimate, *available, batch, settings.data.batch_size_origin);
  if (!warning.empty()) log.warn(warning);
}

// The folder of a new run is removed again when the run is refused before its first step (a config
// error, data that do not fit, a batch too large), so that refusals leave no near-empty folders in
// runs/: nothing was trained, and the error is on the console.
class RemoveIfRefused {
 public:
  explicit RemoveIfRefused(const RunFolder& folder, bool main_rank) : dir_(folder.created && main_rank ? folder.dir : "") {}
  ~RemoveIfRefused() {
    std::error_code ignored;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ignored);
  }
  RemoveIfRefused(const RemoveIfRefused&) = delete;
  RemoveIfRefused& operator=(const RemoveIfRefused&) = delete;
  void training_starts() { dir_.clear(); }

 private:
  std::filesystem::path dir_;
};

TrainSummary run_on_this_rank(const Config& given_config, const TrainSettings& given_settings, const TrainRunOptions& options,
                              DataParallel& data_parallel) {
  const bool main_rank = data_parallel.world().is_main();
  const RunFolder folder = open_shared_run_folder(given_settings, options.resume, data_parallel);
  RemoveIfRefused remove_if_refused(folder, main_rank);
  std::ostream no_output(nullptr);  // ranks other than 0 show nothing (their errors end the job, with their rank)
  std::ostream& out = !main_rank ? no_output : options.console ? *options.console : std::cout;
  // Under a launcher, standard output is a pseudo-terminal of the launcher's (OpenMPI makes one even
  // when its own output goes to a file): plain lines unless [log] progress = bar asks for the bar.
  const bool terminal = main_rank && stdout_is_terminal() && !options.console && !data_parallel.active();
  Console console(out, given_settings.log.level, given_settings.log.progress, terminal, use_colour(terminal));

  // A resume reads its checkpoint first (every rank: the file is on a shared file system) and
  // trains with the run's own config under the keys given again; a finished run is left exactly as
  // it is, train.log included.
  std::optional<TrainingState> saved;
  std::optional<ResumedConfig> resumed;
  std::optional<TrainSettings> resumed_settings;
  if (!folder.resume_from.empty()) {
    saved = load_checkpoint(folder.resume_from);
    check_resume_point(*saved, folder.resume_from, folder.dir);
    resumed = resumed_config(given_config, *saved, folder.resume_from);
    if (resumed) resumed_settings = from_config(resumed->config, given_settings.distributed.world);
  }
  const Config& config = resumed ? resumed->config : given_config;
  const TrainSettings& given = resumed_settings ? *resumed_settings : given_settings;
  if (saved) {
    if (const std::string finished = finished_run(*saved, given); !finished.empty()) {
      console.summary(finished + "; nothing in " + folder.dir.string() + " was changed");
      TrainSummary nothing;
      nothing.run_dir = folder.dir;
      nothing.steps = saved->step;
      return nothing;
    }
  }
  RunLog log(console, main_rank ? folder.dir / "train.log" : std::filesystem::path());
  // Everything that can refuse the resume comes before config.ini and classes.txt are written.
  if (saved) check_resume_keys(*saved, folder.resume_from, given, log);
  TrainingData data = open_training_data(given, log);
  if (data_parallel.active()) {
    check_same_data_on_every_rank(data_parallel.comm(), *data.train_set, given.data.train_spec);
    if (data.validation_loader)
      check_same_data_on_every_rank(data_parallel.comm(), data.validation_loader->dataset(), given.data.validation_spec);
  }
  // [model] num_classes left out: the rest of the run, config.ini included, has the data's count.
  std::optional<TrainSettings> with_data_classes;
  if (data.classes != given.data.classes) {
    Config resolved = config;
    resolved.apply_override("model.num_classes=" + std::to_string(data.classes));
    with_data_classes = from_config(resolved, given.distributed.world);
    log.info("[model] num_classes = " + std::to_string(data.classes) + ", the classes of the training data (num_classes left out)");
  }
  const TrainSettings& settings = with_data_classes ? *with_data_classes : given;
  if (saved) check_resume_classes(*saved, folder.resume_from, data.class_names, settings.data.train_spec);
  Learner learner = build_learner(settings, data.steps_per_epoch, log);
  check_memory(settings, *learner.model, data, log);
  if (const std::string advice = precision_advice(settings); !advice.empty()) log.warn(advice);
  RunProgress progress;
  if (saved) progress = restore_learner(learner, *saved, folder.resume_from, log);
  saved.reset();  // its tensors are the learner's now
  if (main_rank) write_run_description(folder, settings.resolved_ini, data.class_names);
  data_parallel.prepare(*learner.model, settings, log);
  LogSettings metrics_settings = settings.log;
  if (!main_rank) metrics_settings.jsonl = metrics_settings.tensorboard = false;
  RunMetrics metrics(metrics_settings, folder.dir);

  const distributed::World& world = data_parallel.world();
  log.info("cnn_train: " + settings.model.name + " (" + std::to_string(learner.model->parameter_count()) + " parameters) on " +
           settings.compute.device.str() +
           (settings.compute.device_auto ? settings.compute.device.is_cuda() ? " (device = auto)" : " (device = auto: no CUDA device)" : "") +
           (world.distributed() ? " x " + std::to_string(world.world_size) + " ranks" : "") +
           ", " + settings.precision.mode + "; " + std::to_string(data.train_set->size()) + " training images, " +
           std::to_string(data.batches_per_epoch) + " batches of " + std::to_string(data.batch_size) +
           (world.distributed() ? " per rank" : "") + " per epoch; run folder " + folder.dir.string());
  if (resumed && !resumed->changes.empty()) {  // after every check that could refuse the resume: it writes train.log
    std::string text = "the run's own config (" + folder.resume_from.string() + "'s) goes on, changed by what was given again:";
    for (const std::string& change : resumed->changes) text += "\n  " + change;
    log.warn(text + "\n(to keep the run's values, resume with its own " + (folder.dir / "config.ini").string() + ")");
  }
  Trainer trainer(settings, options, folder, console, log, metrics, data, learner, progress, data_parallel);
  remove_if_refused.training_starts();
  return trainer.run();
}
}  // namespace

TrainSummary run_training(const Config& config, const TrainRunOptions& options) {
  const TrainSettings settings = from_config(config, options.world ? *options.world : distributed::detect_world());
  configure_backend(settings.compute);
  DataParallel data_parallel(settings);
  const InterruptHandler interrupt_handler;  // Ctrl-C: stop after the step, write last.h5, say how to resume
  try {
    return run_on_this_rank(config, settings, options, data_parallel);
  } catch (const std::exception& e) {
    // The other ranks would wait for this one in their next collective until the timeout.
    if (data_parallel.active()) data_parallel.comm().abort(std::string("cnn_train: ") + e.what());
    throw;
  }
}

namespace {
// Ctrl-C or SIGTERM on this rank; in a data-parallel run the ranks agree at logged steps (mpirun
// passes the signal to every rank, not necessarily within the same step).
bool Trainer::stop_requested() {
  if (data_parallel_.active() && progress_.step % settings_.log.every_steps != 0) return false;
  return stop_agreed();
}

bool Trainer::stop_agreed() {
  if (!data_parallel_.active()) return InterruptHandler::requested();
  return across_ranks(InterruptHandler::requested() ? 1.0 : 0.0, distributed::ReduceOp::max) > 0;
}

// What the bar, the lines and train.log show after a step of `epoch` (progress_format.h).
StepFigures Trainer::step_figures(const EpochProgress& epoch) const {
  StepFigures f;
  f.epoch = epoch.epoch + 1;
  f.epochs = settings_.loop.epochs;
  f.step = epoch.batches_done;
  f.steps = epoch.batches_in_epoch;
  f.loss = epoch.shown_loss;
  f.lr = learner_.schedule.lr(progress_.step);
  f.elapsed_seconds = seconds_since(epoch.start);
  f.images_per_second = static_cast<double>(epoch.images * world_size_) / std::max(f.elapsed_seconds, 1e-9);
  f.data_wait = data_.train_loader->stats().wait_fraction();
  if (settings_.precision.fp16()) f.loss_scale = last_readout_.scale;  // as of the last read
  const Device& device = settings_.compute.device;
  if (device.is_cuda()) {
    const AllocatorStats memory = cuda_allocator(device.index).stats();
    f.peak_memory_bytes = static_cast<double>(memory.peak_in_use);
    f.reserved_memory_bytes = static_cast<double>(memory.reserved);
  }
  // ETAs from the moving average of step time; validation is not in it.
  const int64_t accumulate = settings_.loop.accumulate;
  int64_t epoch_steps_left = std::max<int64_t>(0, (epoch.batches_in_epoch - epoch.batches_done) / accumulate);
  int64_t run_steps_left = epoch_steps_left + (settings_.loop.epochs - epoch.epoch - 1) * data_.steps_per_epoch;
  if (settings_.loop.max_steps > 0) {
    const int64_t to_max = std::max<int64_t>(0, settings_.loop.max_steps - progress_.step);
    epoch_steps_left = std::min(epoch_steps_left, to_max);
    run_steps_left = std::min(run_steps_left, to_max);
  }
  if (!std::isnan(epoch.step_seconds)) {
    f.epoch_eta_seconds = static_cast<double>(epoch_steps_left) * epoch.step_seconds;
    f.run_eta_seconds = static_cast<double>(run_steps_left) * epoch.step_seconds;
  }
  return f;
}

// Where this run of `epoch` starts: at its beginning, except for the epoch a mid-epoch checkpoint
// left unfinished. Resumed on as many ranks as wrote the checkpoint, it continues at the batch it
// stopped at (the same batches as the uninterrupted run); on another number of ranks, the new
// shards split the samples of the epoch not used yet.
Trainer::EpochStart Trainer::epoch_start(int64_t epoch) const {
  if (epoch != first_epoch_) return {};
  const int64_t samples = saved_position_.samples_in_epoch;
  if (samples < 0)  // a checkpoint that did not record it: from the step count, in steps of whole epochs
    return {.first_batch = std::max<int64_t>(0, (progress_.step - epoch * data_.steps_per_epoch) * settings_.loop.accumulate)};
  if (saved_position_.world_size == world_size_) return {.first_batch = samples / (data_.batch_size * world_size_)};
  return {.skipped_samples = samples};
}

TrainSummary Trainer::run() {
  for (int64_t epoch = progress_.epochs_done; epoch < settings_.loop.epochs; ++epoch) {
    const EpochProgress result = train_epoch(epoch);
    const bool stopped_in_validation = end_epoch(result);
    if (result.reached_max_steps || result.interrupted || stopped_in_validation) break;
  }
  return finish();
}

// One epoch (the rest of it after a mid-epoch resume): micro-batches through forward and backward,
// an optimizer step every train.accumulate of them, until the loader runs dry or max_steps is hit.
EpochProgress Trainer::train_epoch(int64_t epoch) {
  const OptimSettings& optim = settings_.optim;
  if (!optim.frozen.empty() && optim.unfreeze_epoch >= 0 && epoch >= optim.unfreeze_epoch)
    learner_.optimizer->set_frozen(optim.frozen, false);
  const int64_t accumulate = settings_.loop.accumulate;
  const EpochStart start = epoch_start(epoch);
  data_.train_loader->start_epoch(epoch, start.first_batch, start.skipped_samples);
  learner_.optimizer->zero_grad();  // micro-batches left over at the end of the last epoch never stepped
  const Device& device = settings_.compute.device;
  EpochProgress this_epoch{.epoch = epoch,
                             .start = Clock::now(),
                             .batches_done = start.first_batch,
                             .batches_in_epoch = data_.train_loader->batches_this_epoch(),
                             .skipped_samples = start.skipped_samples,
                             .batches_at_step = start.first_batch,
                             .loss_sum = Tensor::zeros({}, DType::f32, device),
                             .last_loss_read = Clock::now() - std::chrono::seconds(10),
                             .last_step = Clock::now()};
  while (auto batch = next_batch(this_epoch)) {
    ++this_epoch.batches_done;
    if (batch->size() == 0) continue;
    const bool last_of_step = (this_epoch.micro_batches + 1) % accumulate == 0;
    const MicroBatch micro_batch = micro_batch_on_device(*batch, this_epoch, last_of_step);
    pictures_.first_batch(micro_batch, progress_.step);  // the run's first batch only
    GradientHook on_gradients = options_.on_gradients;
    if (this_epoch.micro_batches + 1 == accumulate && pictures_.histograms_due(epoch))  // the epoch's first step
      on_gradients = [&](int64_t step, const std::vector<Tensor>& gradients) {
        pictures_.histograms(*learner_.model, learner_.scaler.scale(), step);
        if (options_.on_gradients) options_.on_gradients(step, gradients);
      };
    const bool on_graph = step_on_graph(micro_batch, static_cast<bool>(on_gradients));
    const Tensor loss =
        on_graph ? step_graph_->replay(micro_batch, progress_.step) : forward_backward(learner_, micro_batch, settings_);
    {
      NoGrad no_grad;
      add_(this_epoch.loss_sum, loss);
    }
    if (options_.record_step_losses) summary_.step_losses.push_back(loss.item());
    this_epoch.images += batch->size();
    if (++this_epoch.micro_batches % accumulate != 0) continue;

    if (!on_graph) {
      optimizer_step(learner_, progress_.step, optim.clip_grad_norm, on_gradients, data_parallel_);
      ++eager_steps_;
    }
    ++progress_.step;
    this_epoch.batches_at_step = this_epoch.batches_done;
    if (device.is_cpu()) read_verdicts();
    if (learner_.ema) learner_.ema->after_step(*learner_.model, progress_.step);
    after_step(this_epoch);
    after_profiled_step();
    if (settings_.loop.max_steps > 0 && progress_.step >= settings_.loop.max_steps) {
      this_epoch.reached_max_steps = true;
      break;
    }
    if (stop_requested()) {
      this_epoch.interrupted = true;
      break;
    }
  }
  if (data_.train_loader->wait_stopped()) {
    // Ctrl-C while the loader waited (a file system that hangs): the micro-batches since the last
    // step never stepped, so the checkpoint's position goes back to that step and a resume redoes them.
    this_epoch.interrupted = true;
    this_epoch.batches_done = this_epoch.batches_at_step;
    log_.warn("stopped while waiting for the data loader (a worker is still reading: if the run does not end, a second "
              "Ctrl-C ends it at once)");
  }
  return this_epoch;
}

// PyTorch's recipe warms up with a few eager steps before a capture: an optimizer creates its state
// and cuDNN measures its algorithms in the first step, neither of which a replay may repeat.
constexpr int64_t kGraphWarmupSteps = 3;

void Trainer::start_step_graph() {
  const std::string obstacle = step_graph_obstacle(settings_, world_size_);
  if (!obstacle.empty()) {
    log_.warn("[train] cuda_graphs: the training step cannot be captured, it runs eagerly: " + obstacle);
    return;
  }
  step_graph_ = std::make_unique<StepGraph>(learner_, settings_, data_parallel_);
  log_.info(std::string("[train] cuda_graphs: the training step is captured after ") + std::to_string(kGraphWarmupSteps) +
            " eager steps and replayed" +
            (settings_.compute.device.is_cpu() ? " (on the CPU: its recorded kernel calls, CUDA graphs' emulation)" : ""));
}

bool Trainer::step_on_graph(const MicroBatch& batch, bool hooked) {
  // Eager instead: the warm-up, a hook that reads the gradients, a profiled step (a replay has no
  // per-op spans), and a batch of other shapes (an epoch's last).
  if (!step_graph_ || eager_steps_ < kGraphWarmupSteps || hooked || profile_.recording() || !step_graph_->fits(batch))
    return false;
  const int64_t captures = step_graph_->captures();
  try {
    if (!step_graph_->prepare(batch, progress_.step)) return false;  // the learner changed: eager, then again
  } catch (const Error& e) {
    log_.warn(std::string("[train] cuda_graphs: the training step could not be captured, it runs eagerly from now "
                          "on: ") + e.what());
    step_graph_.reset();
    return false;
  }
  if (step_graph_->captures() != captures) {
    const AllocatorStats memory = step_graph_->memory();
    log_.info("[train] cuda_graphs: captured the training step at step " + std::to_string(progress_.step + 1) +
              (step_graph_->recapture_reason().empty() ? "" : " again: " + step_graph_->recapture_reason()) + " (" +
              format_bytes(static_cast<double>(memory.reserved)) + " held by its tensors)");
  }
  return true;
}

void Trainer::read_verdicts() {
  if (progress_.step == 0) return;
  last_readout_ = learner_.scaler.read();
  guard_.record(progress_.step - 1, last_readout_);
}

// After an optimizer step: the progress display, the logged step's metrics, the step checkpoint.
void Trainer::after_step(EpochProgress& epoch) {
  const int64_t step = progress_.step;
  const bool log_now = step % settings_.log.every_steps == 0;
  const double this_step = seconds_since(epoch.last_step);
  epoch.last_step = Clock::now();
  epoch.step_seconds = std::isnan(epoch.step_seconds) ? this_step : 0.9 * epoch.step_seconds + 0.1 * this_step;
  if (log_now && !settings_.compute.device.is_cpu()) read_verdicts();  // the CPU read them already
  if (log_now || console_.draws_bar()) {
    // Reading the loss waits for the device: the progress bar redraws every step but reads a fresh
    // loss at most once a second (and at logged steps), so the GPU is not synchronised each step.
    if (log_now || seconds_since(epoch.last_loss_read) >= 1.0) epoch.read_loss();
    StepFigures figures = step_figures(epoch);
    // Global figures: the loss averaged over ranks and the slowest rank's data wait, agreed at
    // logged steps only (every rank logs those); images/s count all ranks (their shards are equal).
    if (log_now && data_parallel_.active()) {
      figures.loss = epoch.shown_loss = across_ranks(epoch.shown_loss, distributed::ReduceOp::average);
      figures.data_wait = across_ranks(figures.data_wait, distributed::ReduceOp::max);
    }
    guard_.check_loss(epoch.shown_loss, step, epoch.epoch);
    log_.progress(figures, log_now);
    if (log_now) {
      std::map<std::string, double> numbers = {{"train_loss", figures.loss},
                                               {"lr", figures.lr},
                                               {"images_per_second", figures.images_per_second},
                                               {"data_wait", figures.data_wait}};
      if (settings_.precision.fp16()) numbers["loss_scale"] = last_readout_.scale;
      const Device& device = settings_.compute.device;
      if (device.is_cuda()) {
        const AllocatorStats memory = cuda_allocator(device.index).stats();
        numbers["gpu_memory_bytes"] = static_cast<double>(memory.in_use);
        numbers["gpu_reserved_bytes"] = static_cast<double>(memory.reserved);
      }
      metrics_.write_step(step, epoch.epoch, numbers);
    }
  }
  const int64_t every_steps = settings_.checkpoint.every_steps;
  if (every_steps > 0 && step % every_steps == 0) {
    read_verdicts();
    guard_.check_loss(epoch.mean_loss(), step, epoch.epoch);
    save(folder_.last_checkpoint(), epoch.epoch, samples_used(epoch));
  }
}

// The end of an epoch: the loss check, validation when due, the epoch line and metrics, last.h5
// and best.h5.
bool Trainer::end_epoch(const EpochProgress& epoch) {
  const data::EpochStats loader_stats = data_.train_loader->stats();
  const double epoch_seconds = seconds_since(epoch.start);
  wait_seconds_ += loader_stats.wait_seconds;
  compute_seconds_ += loader_stats.compute_seconds;
  images_ += epoch.images * world_size_;
  double train_loss = epoch.micro_batches ? epoch.mean_loss() : 0.0;
  double wait_fraction = loader_stats.wait_fraction();
  int64_t corrupt = loader_stats.skipped, delivered = loader_stats.samples;
  if (data_parallel_.active()) {  // every rank's figures made one: the mean loss, all corrupt and delivered images, the slowest rank's wait
    const std::vector<double> sums = distributed::all_reduce_values(
        data_parallel_.comm(), {train_loss, static_cast<double>(corrupt), static_cast<double>(delivered)}, distributed::ReduceOp::sum);
    train_loss = sums[0] / static_cast<double>(world_size_);
    corrupt = static_cast<int64_t>(sums[1]);
    delivered = static_cast<int64_t>(sums[2]);
    wait_fraction = across_ranks(wait_fraction, distributed::ReduceOp::max);
  }
  // On every rank alike (the counts are global), before anything is validated or saved.
  check_corrupt_images(epoch.epoch + 1, {"training", corrupt, delivered, data_.train_loader->corrupt_files(), settings_.data.train_spec},
                       settings_.data.max_corrupt_fraction);
  read_verdicts();
  guard_.check_loss(train_loss, progress_.step, epoch.epoch);  // before this epoch's checkpoint could replace the last good one

  const int64_t number = epoch.epoch + 1, epochs = settings_.loop.epochs;
  // A max_steps stop inside the epoch leaves it unfinished: a resume continues it from `step`.
  const bool unfinished = (epoch.reached_max_steps || epoch.interrupted) && epoch.batches_done < epoch.batches_in_epoch;
  if (learner_.swa && !unfinished) learner_.swa->after_epoch(*learner_.model, number);
  // The epoch line: the step figures' fields for the whole epoch (mean loss, its time, the run's ETA).
  EpochLine line{.figures = step_figures(epoch), .corrupt_images = corrupt};
  line.figures.loss = train_loss;
  line.figures.data_wait = wait_fraction;
  line.figures.elapsed_seconds = epoch_seconds;
  line.figures.epoch_eta_seconds = std::nan("");
  std::map<std::string, double> numbers = {{"train_loss", train_loss},
                                           {"epoch_seconds", epoch_seconds},
                                           {"lr", line.figures.lr},
                                           {"images_per_second", line.figures.images_per_second},
                                           {"data_wait", wait_fraction}};
  const bool last = number == epochs || epoch.reached_max_steps || epoch.interrupted;
  // A run stopped by Ctrl-C does not validate: the person wants it to stop now.
  const bool validate_now =
      data_.validation_loader && !epoch.interrupted && (number % settings_.loop.eval_every == 0 || last);
  std::optional<EpochValidation> validation;
  // Ctrl-C during the validation: the epoch's training is complete and kept in last.h5, its
  // validation is left out, and the run stops here (the ranks agree on it after validating).
  bool stop_here = false;
  if (validate_now) {
    validation = validate_epoch(epoch.epoch, line, numbers);
    stop_here = stop_agreed();
  }
  log_.summary(format_epoch_line(line));

  // The checkpoints come before the run's record files, so that a record that cannot be written
  // never costs a checkpoint; and best.h5 before last.h5, so that last.h5 never names a best that
  // best.h5 does not hold (when writing best.h5 fails, last.h5 keeps the previous epoch).
  const int64_t epochs_done = unfinished ? epoch.epoch : number, samples_in_epoch = unfinished ? samples_used(epoch) : 0;
  const int64_t every = settings_.checkpoint.every_epochs;
  if (validation && validation->improved && settings_.checkpoint.save_best)
    save(folder_.best_checkpoint(), epochs_done, samples_in_epoch, best_weights());
  if ((every > 0 && number % every == 0) || last || stop_here) save(folder_.last_checkpoint(), epochs_done, samples_in_epoch);

  if (validation) {
    if (data_parallel_.world().is_main()) write_confusion(folder_.dir / "confusion.json", validation->live, data_.class_names, number);
    pictures_.after_validation(validation->live, progress_.step);
  }
  metrics_.write_epoch(progress_.step, epoch.epoch, numbers);
  if (settings_.log.report && data_parallel_.world().is_main()) write_report(folder_.dir / "report.html", {read_run(folder_.dir)});
  if (learner_.swa && last && !epoch.interrupted && !stop_here) finish_swa(epochs_done);
  summary_.epochs_run = number - first_epoch_;
  const std::string resume = "Resume with: cnn_train " + config_path() + " --resume " + folder_.dir.string();
  if (epoch.interrupted) {
    summary_.interrupted = true;
    log_.summary("interrupted after step " + std::to_string(progress_.step) + " (epoch " + std::to_string(number) + ", batch " +
                 std::to_string(epoch.batches_done) + "/" + std::to_string(epoch.batches_in_epoch) + "); " +
                 folder_.last_checkpoint().string() + " holds it. " + resume);
  } else if (stop_here) {
    summary_.interrupted = true;
    log_.summary("interrupted during the validation of epoch " + std::to_string(number) + ": its training is complete and " +
                 folder_.last_checkpoint().string() + " holds it" +
                 (validation ? "" : "; its validation was stopped and is left out of the record") +
                 (number < epochs ? ". " + resume : " (the last epoch: nothing is left to train)"));
  }
  return stop_here;
}

// Validation after an epoch: its part of the epoch line and numbers, the best metric so far and
// the plateau schedule's observation.
std::optional<Trainer::EpochValidation> Trainer::validate_epoch(int64_t epoch, EpochLine& line,
                                                               std::map<std::string, double>& numbers) {
  Validation result = validate_weights(epoch, Weights::live);
  if (result.stopped) return std::nullopt;
  std::optional<Validation> ema;  // the EMA weights', reported beside the live weights'
  if (learner_.ema) {
    ema = validate_weights(epoch, Weights::ema);
    if (ema->stopped) return std::nullopt;
  }
  // Before anything is reported or saved from it (the counts are over all ranks, so every rank agrees).
  check_corrupt_images(epoch + 1,
                       {"validation", result.corrupt, result.images, data_.validation_loader->corrupt_files(), settings_.data.validation_spec},
                       settings_.data.max_corrupt_fraction);
  line.val_loss = result.loss;
  line.val_corrupt_images = result.corrupt;
  numbers["val_corrupt_images"] = static_cast<double>(result.corrupt);
  line.val_top1 = result.top1;
  line.val_top5 = result.top5;
  numbers["val_loss"] = result.loss;
  numbers["val_top1"] = result.top1;
  numbers["val_top5"] = result.top5;
  summary_.last_top1 = result.top1;
  summary_.last_val_loss = result.loss;
  if (ema) {
    line.ema_top1 = summary_.last_ema_top1 = ema->top1;
    numbers["ema_val_loss"] = ema->loss;
    numbers["ema_val_top1"] = ema->top1;
    numbers["ema_val_top5"] = ema->top5;
  }
  const Validation& judged = settings_.checkpoint.best_of_ema ? *ema : result;
  const bool lower_is_better = settings_.checkpoint.best_is_loss;
  const double metric = lower_is_better ? judged.loss : judged.top1, best = progress_.best_metric;
  const bool improved = std::isnan(best) || (lower_is_better ? metric < best : metric > best);
  if (improved) {
    progress_.best_metric = metric;
    progress_.best = best_validation(judged, epoch + 1, best_weights());
  }
  learner_.schedule.observe(settings_.checkpoint.plateau_watches_top1 ? result.top1 : result.loss);
  return EpochValidation{std::move(result), improved};
}

// A validation pass over `weights` (the EMA or SWA average swapped into the model for it).
Validation Trainer::validate_weights(int64_t epoch, Weights weights) {
  const Clock::time_point start = Clock::now();
  const int64_t batches = data_.validation_loader->steps_per_epoch();
  const WeightSwap swap(*learner_.model, averaged_weights(learner_, weights));
  const Validation result = validate(*learner_.model, *data_.validation_loader, settings_.data.classes, settings_.compute.device, epoch,
                                     data_parallel_.comm(), [&](int64_t done) {
                                       console_.validation_progress(done, batches);
                                       if (options_.on_validation_batch) options_.on_validation_batch(epoch, done);
                                     },
                                     settings_.log.images && weights == Weights::live ? kMistakesShown : 0,
                                     stop_check_for(world_size_));
  validation_seconds_ += seconds_since(start);
  return result;
}

std::optional<data::Batch> Trainer::next_batch(const EpochProgress& epoch) {
  if (epoch.micro_batches % settings_.loop.accumulate == 0) profile_.step_starts();  // a step's first micro-batch
  std::optional<data::Batch> batch;
  {
    const profiler::Scope wait("data wait", profiler::Category::phase, Device::cpu());
    batch = data_.train_loader->next();
  }
  if (!batch) profile_.no_step();
  return batch;
}

MicroBatch Trainer::micro_batch_on_device(const data::Batch& batch, const EpochProgress& epoch, bool last_of_step) {
  const Device& device = settings_.compute.device;
  const profiler::Scope span("input upload", profiler::Category::phase, device);
  return {.images = data_.images_on_device(batch, device, epoch.epoch, epoch.batches_done),
          .labels = batch.labels.to(device),
          .epoch = epoch.epoch,
          .index = epoch.batches_done,
          .reducer = last_of_step ? data_parallel_.reducer() : nullptr};
}

void Trainer::after_profiled_step() {
  if (std::optional<profiler::Recording> recording = profile_.step_ends()) write_profile_files(*recording);
}

// profile.txt, profile.json and trace.json in the run folder (the main rank's).
void Trainer::write_profile_files(const profiler::Recording& recording) {
  if (!data_parallel_.world().is_main()) return;
  const Device& device = settings_.compute.device;
  const ProfileContext context{.device = device,
                               .first_step = profile_.first_step(),
                               .images_per_step = data_.batch_size * settings_.loop.accumulate,
                               .memory = device.is_cuda() ? cuda_allocator(device.index).stats() : cpu_allocator().stats()};
  write_profile(folder_.dir, recording, context);
  std::string what = "profile of " + std::to_string(profile_.steps_recorded()) + " steps written to " + (folder_.dir / "profile.txt").string() +
                     " (and profile.json; open trace.json in https://ui.perfetto.dev or chrome://tracing)";
  if (profile_.steps_recorded() < profile_.steps_wanted())
    what += "; the run ended before the " + std::to_string(profile_.steps_wanted()) + " steps of [log] profile_steps";
  log_.info(what);
}

// The next batch of training images of the epoch keyed `epoch` (an undefined tensor at its end).
Tensor Trainer::next_training_images(int64_t epoch, int64_t& batches) {
  while (auto batch = data_.train_loader->next()) {
    if (batch->size() == 0) continue;
    return data_.images_on_device(*batch, settings_.compute.device, epoch, ++batches);
  }
  return {};
}

// The end of SWA, after the last epoch: the average's BatchNorm statistics from one pass over the
// training data (an epoch of its own, in train mode, without gradients), then its validation,
// swa.h5, and best.h5 when it beats the best so far.
void Trainer::finish_swa(int64_t epochs_done) {
  Swa& swa = *learner_.swa;
  if (!swa.average()) return;  // the run stopped before its first SWA epoch ended
  Module& model = *learner_.model;
  const int64_t key = settings_.loop.epochs;  // the epoch after the last one keys the pass's draws
  int64_t batches = 0;
  {
    const WeightSwap swap(model, swa.average());
    data_.train_loader->start_epoch(key, 0, 0);
    if (update_batch_norm(model, [&] { return next_training_images(key, batches); }) > 0 && data_parallel_.active())
      for (const NamedTensor& b : model.named_buffers())  // each rank saw its shard: the statistics of all of them
        if (is_floating(b.tensor.dtype())) data_parallel_.comm().all_reduce(b.tensor, distributed::ReduceOp::average);
    swa.take_from(model);
  }
  swa_finished_ = true;
  std::string text = "swa: " + std::to_string(swa.models()) + (swa.models() == 1 ? " model" : " models") +
                     " averaged, BatchNorm statistics from " + std::to_string(batches) + " training batches";
  if (data_.validation_loader) {
    const Validation result = validate_weights(key - 1, Weights::swa);
    if (result.stopped) {  // the average is kept in swa.h5 all the same
      summary_.interrupted = true;
      text += "; its validation was stopped by the interrupt";
    } else {
      summary_.swa_top1 = result.top1;
      metrics_.write_epoch(progress_.step, key - 1, {{"swa_val_loss", result.loss}, {"swa_val_top1", result.top1}, {"swa_val_top5", result.top5}});
      EpochLine figures;
      figures.val_loss = result.loss;
      figures.val_top1 = result.top1;
      figures.val_top5 = result.top5;
      text += "; " + format_validation_figures(figures);
      const bool lower_is_better = settings_.checkpoint.best_is_loss;
      const double metric = lower_is_better ? result.loss : result.top1, best = progress_.best_metric;
      if (std::isnan(best) || (lower_is_better ? metric < best : metric > best)) {
        progress_.best_metric = metric;
        progress_.best = best_validation(result, key, Weights::swa);
        if (settings_.checkpoint.save_best) save(folder_.best_checkpoint(), epochs_done, 0, Weights::swa);
        text += " (best)";
      }
    }
  }
  log_.summary(text);
  save(folder_.swa_checkpoint(), epochs_done, 0, Weights::swa);
}

void Trainer::save(const std::filesystem::path& path, int64_t epochs_done, int64_t samples_in_epoch, Weights weights) {
  {
    const WeightSwap swap(*learner_.model, averaged_weights(learner_, weights));
    guard_.check_weights(*learner_.model, progress_.step);
  }
  // Every rank holds the same weights: rank 0 alone writes them.
  if (data_parallel_.world().is_main())
    save_learner(path, learner_, progress_, epochs_done, samples_in_epoch, settings_, data_.class_names, weights);
}

// model.safetensors, the summary: its "done:" line and the report below it.
TrainSummary Trainer::finish() {
  if (std::optional<profiler::Recording> recording = profile_.run_ends()) write_profile_files(*recording);
  if (settings_.checkpoint.export_safetensors && data_parallel_.world().is_main()) {
    // The weights the run ends with: SWA's when it ran, else those best.h5 is chosen by (timm exports
    // the EMA when it decides the best checkpoint); the file says which.
    const Weights exported = swa_finished_ ? Weights::swa : best_weights();
    const WeightSwap swap(*learner_.model, averaged_weights(learner_, exported));
    save_weights(*learner_.model, folder_.dir / "model.safetensors", {{"cnn.weights", weights_name(exported)}});
  }
  summary_.steps = progress_.step;
  summary_.skipped_steps = guard_.skipped_steps();
  summary_.seconds = seconds_since(run_start_);
  summary_.images_per_second = static_cast<double>(images_) / std::max(summary_.seconds, 1e-9);
  const double loader_seconds = wait_seconds_ + compute_seconds_;
  summary_.data_wait_share = loader_seconds > 0 ? wait_seconds_ / loader_seconds : 0;
  // The best is what best.h5 holds: the validation that [checkpoint] best_metric chose, of the weights
  // it chose (live, EMA or SWA), kept in checkpoints so that a resumed run reports it too.
  const BestValidation& best = progress_.best;
  if (best.known()) {
    summary_.best_top1 = best.top1;
    summary_.best_epoch = best.epoch;
    summary_.best_weights = best.weights;
  }
  std::ostringstream done;
  // A run stopped by Ctrl-C/SIGTERM is not done: its line says so (the resume command is above it).
  done << std::fixed << std::setprecision(2) << (summary_.interrupted ? "stopped: " : "done: ");
  if (best.known()) done << "best val top-1 " << best.top1 << "% at epoch " << best.epoch << format_best_weights(best.weights) << ", ";
  done << "total " << format_seconds(summary_.seconds) << ", " << std::setprecision(1) << summary_.images_per_second
       << " img/s, data wait " << 100 * summary_.data_wait_share << "%; run folder " << folder_.dir.string();
  RunReport report{.best_top1 = best.known() ? best.top1 : -1,
                   .best_epoch = best.epoch,
                   .best_weights = best.known() ? best.weights : "",
                   .best_loss = best.loss,
                   .best_top5 = best.top5,
                   .total_seconds = summary_.seconds,
                   .validation_seconds = validation_seconds_,
                   .images_per_second = summary_.images_per_second,
                   .data_wait = summary_.data_wait_share,
                   .steps = summary_.steps,
                   .skipped_steps = summary_.skipped_steps,
                   .run_dir = folder_.dir.string(),
                   .best_checkpoint = {},
                   .last_checkpoint = {},
                   .config_path = config_path(),
                   .interrupted = summary_.interrupted};
  if (std::filesystem::exists(folder_.best_checkpoint())) report.best_checkpoint = folder_.best_checkpoint().string();
  if (std::filesystem::exists(folder_.last_checkpoint())) report.last_checkpoint = folder_.last_checkpoint().string();
  std::string table = format_run_report(report);
  if (!table.empty() && table.back() == '\n') table.pop_back();
  log_.summary(done.str() + "\n" + table);
  return summary_;
}
}  // namespace

}  // namespace cnn::train
