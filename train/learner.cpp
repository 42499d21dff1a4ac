// Building the learner, and its checkpoints (see learner.h).
#include "train/learner.h"

#include <algorithm>

#include "layers/registry.h"
#include "layers/weights.h"
#include "train/checkpoint.h"
#include "train/eval_support.h"
#include "train/optim/adamw.h"
#include "train/optim/param_groups.h"
#include "train/optim/sgd.h"
#include "train/run_log.h"
#include "train/train_settings.h"

namespace cnn::train {

namespace {
std::string own_head_prefix(Module& model);

// [model] pretrained_strict: with a fresh head (pretrained_head = false) the head's tensors may be
// missing, unexpected or of another shape (a new class count); any other difference means the file
// was written for another model (resnet18 weights into a resnet34), which used to train with one
// log line. Refused, listing what differs.
void refuse_partial_load(const WeightsReport& report, Module& model, const ModelSettings& wanted) {
  const std::string head = own_head_prefix(model);
  const auto outside_head = [&](const std::vector<std::string>& names) {
    std::vector<std::string> out;
    for (const std::string& entry : names)
      if (!has_name_prefix(entry.substr(0, entry.find(':')), head)) out.push_back(entry);
    return out;
  };
  WeightsReport rest;
  rest.loaded = report.loaded;
  rest.missing = outside_head(report.missing);
  rest.unexpected = outside_head(report.unexpected);
  rest.mismatched = outside_head(report.mismatched);
  CNN_CHECK(rest.complete(), wanted.pretrained_origin, ": [model] pretrained = ", wanted.pretrained, " does not fit ", wanted.name,
            " outside its head ('", head, "'): ", rest.summary(),
            ". The file was written for another model: check [model] name, or set [model] pretrained_strict = false to load "
            "what matches");
}

std::unique_ptr<Module> build_model(const TrainSettings& settings, RunLog& log) {
  const ModelSettings& wanted = settings.model;
  std::unique_ptr<Module> model = make_model(wanted.name, static_cast<int>(settings.data.classes), settings.data.channels,
                                             settings.compute.seed, wanted.options);
  if (!wanted.pretrained.empty()) {
    const WeightsReport report = load_weights(*model, wanted.pretrained, !wanted.pretrained_head);
    if (wanted.pretrained_strict && !wanted.pretrained_head) refuse_partial_load(report, *model, wanted);
    log.info("pretrained weights " + wanted.pretrained + ": " + report.summary());
  }
  model->to(settings.compute.device);
  if (settings.precision.compute != DType::f32) model->to(settings.precision.compute);
  model->set_gradient_checkpointing(wanted.gradient_checkpointing);
  model->train();
  return model;
}

// The name of the module the model marks as its head ("fc", "classifier"; "" when it marks none).
std::string own_head_prefix(Module& model) {
  for (const auto& [name, module] : model.named_modules())
    if (module->is_head()) return name;
  return "";
}

// [optim] head: the model's own head when empty; a name that matches no parameter is refused (it
// would silently leave head_lr_mult unused), naming the model's head.
ParamGroupOptions resolved_groups(const OptimSettings& settings, Module& model, const std::vector<NamedParameter>& params) {
  ParamGroupOptions groups = settings.groups;
  const std::string own = own_head_prefix(model);
  if (groups.head_prefix.empty()) {
    groups.head_prefix = own;
    return groups;
  }
  const bool matched = std::any_of(params.begin(), params.end(), [&](const NamedParameter& p) {
    return has_name_prefix(p.name, groups.head_prefix);
  });
  CNN_CHECK(matched, settings.head_origin, ": [optim] head = '", groups.head_prefix, "' matches no parameter of the model; ",
            own.empty() ? std::string("the model marks no head") : "the model's head is '" + own + "'",
            " (leave [optim] head empty to use it; prefixes are whole name components, e.g. 'fc' or 'classifier')");
  return groups;
}

std::unique_ptr<Optimizer> build_optimizer(const OptimSettings& settings, Module& model) {
  const std::vector<NamedParameter> params = model.named_parameters();
  std::vector<ParamGroup> groups = make_param_groups(as_named(params), resolved_groups(settings, model, params));
  std::unique_ptr<Optimizer> optimizer;
  if (settings.adamw)
    optimizer = std::make_unique<AdamW>(groups, settings.adamw_options);
  else
    optimizer = std::make_unique<SGD>(groups, settings.sgd_options);
  if (!settings.frozen.empty()) optimizer->set_frozen(settings.frozen, true);
  return optimizer;
}
}  // namespace

Learner build_learner(const TrainSettings& settings, int64_t steps_per_epoch, RunLog& log) {
  std::unique_ptr<Module> model = build_model(settings, log);
  std::unique_ptr<Optimizer> optimizer = build_optimizer(settings.optim, *model);
  ScheduleOptions schedule = settings.optim.schedule;
  schedule.steps_per_epoch = steps_per_epoch;
  Learner learner{std::move(model), std::move(optimizer), LrSchedule(schedule), LossScaler(settings.precision.loss_scaler, settings.compute.device), nullptr,
                  nullptr};
  if (settings.precision.cast_cache)
    for (const NamedTensor& copy : learner.model->keep_low_precision_copies())
      learner.optimizer->set_low_precision_copy(copy.name, copy.tensor);
  if (settings.ema.on()) learner.ema = std::make_unique<Ema>(*learner.model, settings.ema);
  if (settings.swa.on()) learner.swa = std::make_unique<Swa>(settings.swa);
  return learner;
}

const WeightAverage* averaged_weights(const Learner& learner, Weights weights) {
  if (weights == Weights::live) return nullptr;
  const WeightAverage* average = weights == Weights::ema ? (learner.ema ? &learner.ema->average() : nullptr)
                                                         : (learner.swa ? learner.swa->average() : nullptr);
  CNN_CHECK(average, "the ", weights_name(weights), " weights were asked for, but the run has none");
  return average;
}

namespace {
// The weight averages of a checkpoint: restored when the run keeps them; an average the checkpoint
// lacks (turned on at the resume) starts from the restored weights.
void restore_averages(Learner& learner, const TrainingState& saved, const std::string& source, RunLog& log) {
  if (learner.ema) {
    if (!saved.ema.empty())
      learner.ema->load(saved.ema, saved.ema_updates, source);
    else {
      learner.ema = std::make_unique<Ema>(*learner.model, learner.ema->settings());
      log.info("the checkpoint has no EMA of the weights: the EMA starts from its weights");
    }
  }
  if (learner.swa) learner.swa->load(*learner.model, saved.swa, saved.swa_models, source);
}
}  // namespace

RunProgress restore_learner(Learner& learner, const TrainingState& saved, const std::filesystem::path& checkpoint, RunLog& log) {
  restore_tensors(saved.params, as_named(learner.model->named_parameters()), checkpoint.string());
  restore_tensors(saved.buffers, as_named(learner.model->named_buffers()), checkpoint.string());
  learner.model->refresh_low_precision_copies();
  learner.optimizer->load_state(saved.optimizer);
  learner.schedule.load_state(saved.lr_schedule);
  if (!saved.loss_scaler.empty()) learner.scaler.load_state(saved.loss_scaler);
  restore_averages(learner, saved, checkpoint.string(), log);
  log.info("resumed from " + checkpoint.string() + " after epoch " + std::to_string(saved.epoch) + ", step " +
           std::to_string(saved.step));
  return {.epochs_done = saved.epoch,
          .step = saved.step,
          .best_metric = saved.best_metric,
          .best = saved.best,
          .samples_in_epoch = saved.samples_in_epoch,
          .world_size = saved.world_size};
}

void save_learner(const std::filesystem::path& path, const Learner& learner, const RunProgress& progress, int64_t epochs_done,
                  int64_t samples_in_epoch, const TrainSettings& settings, const std::vector<std::string>& class_names,
                  Weights weights) {
  const WeightSwap swap(*learner.model, averaged_weights(learner, weights));
  TrainingState state;
  state.weights = weights_name(weights);
  if (learner.ema) {
    state.ema = learner.ema->average().tensors();
    state.ema_updates = learner.ema->updates();
  }
  if (learner.swa && learner.swa->average()) {
    state.swa = learner.swa->average()->tensors();
    state.swa_models = learner.swa->models();
  }
  state.params = as_named(learner.model->named_parameters());
  state.buffers = as_named(learner.model->named_buffers());
  state.optimizer = learner.optimizer->state();
  state.epoch = epochs_done;
  state.step = progress.step;
  state.samples_in_epoch = samples_in_epoch;
  state.world_size = settings.distributed.world.world_size;
  state.seed = settings.compute.seed;
  state.best_metric = progress.best_metric;
  state.best = progress.best;
  state.lr_schedule = learner.schedule.state();
  state.loss_scaler = learner.scaler.state();
  state.config = settings.resolved_ini;
  state.class_names = class_names;
  save_checkpoint(path, state);
}

}  // namespace cnn::train
