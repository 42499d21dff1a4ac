// Learning-rate curves, ReduceLROnPlateau's bookkeeping, and the linear scaling rule.
#include "train/schedule/lr_schedule.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>
#include <sstream>
#include <string>

#include "engine/error.h"
#include "train/config/config.h"

namespace cnn::train {

ScheduleKind parse_schedule_kind(const std::string& name) {
  if (name == "warmup_cosine") return ScheduleKind::warmup_cosine;
  if (name == "step") return ScheduleKind::step;
  if (name == "multistep") return ScheduleKind::multistep;
  if (name == "exponential") return ScheduleKind::exponential;
  if (name == "constant") return ScheduleKind::constant;
  if (name == "plateau") return ScheduleKind::plateau;
  throw Error("unknown learning-rate schedule '" + name +
              "'; use warmup_cosine, step, multistep, exponential, constant or plateau");
}

LrSchedule::LrSchedule(ScheduleOptions options) : options_(std::move(options)) {
  CNN_CHECK(options_.steps_per_epoch >= 1 && options_.epochs >= 1, "learning-rate schedule: steps per epoch (",
            options_.steps_per_epoch, ") and epochs (", options_.epochs, ") must be at least 1");
  warmup_steps_ = std::llround(options_.warmup_epochs * static_cast<double>(options_.steps_per_epoch));
  best_ = options_.plateau_maximize ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity();
}

double LrSchedule::lr(int64_t step) const {
  const ScheduleOptions& o = options_;
  const int64_t swa_epoch = step / o.steps_per_epoch - o.swa_start;
  if (o.swa_start < 0 || swa_epoch < 0) return scheduled_lr(step);
  const double t = o.swa_anneal_epochs > 0
                       ? std::min(1.0, static_cast<double>(swa_epoch) / static_cast<double>(o.swa_anneal_epochs))
                       : 1.0;
  const double a = o.swa_anneal_linear ? t : 0.5 * (1.0 - std::cos(std::numbers::pi * t));
  return o.swa_lr * a + scheduled_lr(o.swa_start * o.steps_per_epoch) * (1.0 - a);
}

double LrSchedule::scheduled_lr(int64_t step) const {
  const ScheduleOptions& o = options_;
  const int64_t epoch = step / o.steps_per_epoch;
  double lr = o.base_lr;
  switch (o.kind) {
    case ScheduleKind::warmup_cosine: {
      const int64_t total = o.epochs * o.steps_per_epoch;
      const int64_t span = std::max<int64_t>(1, total - warmup_steps_);
      const double t = std::clamp(static_cast<double>(step - warmup_steps_) / static_cast<double>(span), 0.0, 1.0);
      lr = o.min_lr + (o.base_lr - o.min_lr) * 0.5 * (1.0 + std::cos(std::numbers::pi * t));
      break;
    }
    case ScheduleKind::step: lr *= std::pow(o.gamma, static_cast<double>(epoch / o.step_size)); break;
    case ScheduleKind::multistep: {
      int passed = 0;
      for (int64_t m : o.milestones) passed += epoch >= m ? 1 : 0;
      lr *= std::pow(o.gamma, passed);
      break;
    }
    case ScheduleKind::exponential: lr *= std::pow(o.gamma, static_cast<double>(epoch)); break;
    case ScheduleKind::constant: break;
    case ScheduleKind::plateau: lr = std::max(lr * plateau_factor_, std::min(o.min_lr, lr)); break;
  }
  if (step < warmup_steps_) {
    const double progress = static_cast<double>(step + 1) / static_cast<double>(warmup_steps_);
    lr *= o.warmup_start_factor + (1.0 - o.warmup_start_factor) * progress;
  }
  return lr;
}

bool LrSchedule::observe(double metric) {
  if (options_.kind != ScheduleKind::plateau) return false;
  const double t = options_.threshold;
  const bool better = options_.plateau_maximize ? metric > best_ * (best_ >= 0 ? 1.0 + t : 1.0 - t)
                                                : metric < best_ * (best_ >= 0 ? 1.0 - t : 1.0 + t);
  if (better) {
    best_ = metric;
    bad_epochs_ = 0;
  } else {
    ++bad_epochs_;
  }
  if (cooldown_left_ > 0) {
    --cooldown_left_;
    bad_epochs_ = 0;
  }
  if (bad_epochs_ > options_.patience) {
    plateau_factor_ *= options_.gamma;
    cooldown_left_ = options_.cooldown;
    bad_epochs_ = 0;
    return true;
  }
  return false;
}

std::vector<double> LrSchedule::state() const {
  return {plateau_factor_, best_, static_cast<double>(bad_epochs_), static_cast<double>(cooldown_left_)};
}

void LrSchedule::load_state(const std::vector<double>& state) {
  CNN_CHECK(state.size() == 4, "learning-rate schedule state has ", state.size(), " values, expected 4");
  plateau_factor_ = state[0];
  best_ = state[1];
  bad_epochs_ = static_cast<int64_t>(state[2]);
  cooldown_left_ = static_cast<int64_t>(state[3]);
}

double linear_scaled_lr(double lr, int64_t global_batch, int64_t reference_batch) {
  if (reference_batch <= 0) return lr;
  return lr * static_cast<double>(global_batch) / static_cast<double>(reference_batch);
}

namespace {
// Settings that each pass their own range but contradict one another, refused with file:line.
void check_schedule_agrees(const Config& config, const ScheduleOptions& o, int64_t global_batch) {
  const int64_t reference = config.integer("schedule.reference_batch_size");
  std::ostringstream lr_words;
  lr_words << "[optim] lr " << config.real("optim.lr") << " (" << config.origin("optim.lr") << ")";
  if (reference > 0)
    lr_words << " scaled by the global batch " << global_batch << " / [schedule] reference_batch_size " << reference << " ("
             << config.origin("schedule.reference_batch_size") << ")";
  CNN_CHECK(o.base_lr <= 100, "the learning rate would be ", o.base_lr, ": ", lr_words.str(),
            ", past [optim] lr's range (0, 100]; raise reference_batch_size or lower lr");
  const bool uses_min_lr = o.kind == ScheduleKind::warmup_cosine || o.kind == ScheduleKind::plateau;
  CNN_CHECK(!uses_min_lr || o.min_lr <= o.base_lr, config.origin("schedule.min_lr"), ": [schedule] min_lr = ",
            o.min_lr, " is above the learning rate ", o.base_lr, " (", lr_words.str(), "); the ",
            o.kind == ScheduleKind::plateau ? "plateau schedule would raise it" : "cosine would rise", "; set min_lr below lr");
  CNN_CHECK(o.kind != ScheduleKind::plateau || !config.text("data.val_path").empty(), config.origin("schedule.name"),
            ": [schedule] name = plateau watches the validation metric, but there is no validation set ([data] val_path is "
            "empty): the learning rate would never decay; give a val_path or choose another schedule");
}
}  // namespace

ScheduleOptions schedule_options(const Config& config, int64_t steps_per_epoch, int64_t global_batch) {
  ScheduleOptions o;
  o.kind = parse_schedule_kind(config.text("schedule.name"));
  o.base_lr = linear_scaled_lr(config.real("optim.lr"), global_batch, config.integer("schedule.reference_batch_size"));
  o.steps_per_epoch = steps_per_epoch;
  o.epochs = config.optional_integer("schedule.epochs").value_or(config.integer("train.epochs"));
  o.warmup_epochs = config.real("schedule.warmup_epochs");
  o.warmup_start_factor = config.real("schedule.warmup_start_factor");
  o.min_lr = config.real("schedule.min_lr");
  o.step_size = config.integer("schedule.step_size");
  o.milestones = config.integers("schedule.milestones");
  o.gamma = config.real("schedule.gamma");
  o.plateau_maximize = config.text("schedule.plateau_metric") == "val_top1";
  o.patience = config.integer("schedule.patience");
  o.cooldown = config.integer("schedule.cooldown");
  o.threshold = config.real("schedule.threshold");
  o.swa_start = config.integer("swa.start_epoch") - 1;  // 0 (off) becomes -1
  o.swa_lr = config.real("swa.lr");
  o.swa_anneal_epochs = config.integer("swa.anneal_epochs");
  o.swa_anneal_linear = config.text("swa.anneal") == "linear";
  check_schedule_agrees(config, o, global_batch);
  return o;
}

}  // namespace cnn::train
