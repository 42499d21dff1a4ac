// Learning-rate schedules, evaluated at every optimizer step: an optional linear warmup, then
// warmup_cosine (cosine decay from the base rate to min_lr over the steps after warmup), step
// (times gamma every step_size epochs), multistep (times gamma at each milestone epoch),
// exponential (times gamma every epoch), constant, or plateau (ReduceLROnPlateau: times gamma when
// the watched validation metric has not improved for `patience` epochs). Epoch-based decays happen
// at epoch boundaries, as PyTorch's schedulers stepped once per epoch do.
//
// Warmup: for the first W = round(warmup_epochs * steps_per_epoch) steps the rate is multiplied by
// f + (1 - f) (step + 1) / W (f: warmup_start_factor), reaching the schedule's rate at step W - 1.
//
// SWA ([swa], train/swa.h) replaces the schedule from its first epoch on by SWALR
// (torch.optim.swa_utils.SWALR stepped once per epoch): in the k-th SWA epoch (k = 0, 1, ...) the
// rate is swa_lr a + lr0 (1 - a), a = anneal(min(1, k / swa_anneal_epochs)) (a = 1 when
// swa_anneal_epochs is 0), lr0 the schedule's rate at the first SWA step, anneal cos
// ((1 - cos(pi t)) / 2) or linear (t).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace cnn::train {

class Config;

enum class ScheduleKind { warmup_cosine, step, multistep, exponential, constant, plateau };

struct ScheduleOptions {
  ScheduleKind kind = ScheduleKind::warmup_cosine;
  double base_lr = 0.1;
  int64_t steps_per_epoch = 1;
  int64_t epochs = 1;  // warmup_cosine spans these ([schedule] epochs, else [train] epochs); later steps stay at min_lr
  double warmup_epochs = 0, warmup_start_factor = 0;
  double min_lr = 0;                 // cosine end, and the floor of plateau decays
  int64_t step_size = 30;            // step
  std::vector<int64_t> milestones;   // multistep
  double gamma = 0.1;                // step, multistep, exponential, plateau
  bool plateau_maximize = false;     // plateau: higher metric is better (accuracy)
  int64_t patience = 10, cooldown = 0;
  double threshold = 1e-4;           // plateau: relative improvement that counts
  int64_t swa_start = -1;            // SWALR from this 0-based epoch on (-1: no SWA)
  double swa_lr = 0.05;
  int64_t swa_anneal_epochs = 10;
  bool swa_anneal_linear = false;    // else cos
};

ScheduleKind parse_schedule_kind(const std::string& name);

class LrSchedule {
 public:
  explicit LrSchedule(ScheduleOptions options);

  // The learning rate of optimizer step `step` (0-based, counted over the whole run).
  double lr(int64_t step) const;
  // plateau: the validation metric at the end of an epoch; true when it lowered the rate. Other
  // schedules ignore it (and return false).
  bool observe(double metric);

  // Plateau state, for checkpoints: {factor, best, bad_epochs, cooldown_left}.
  std::vector<double> state() const;
  void load_state(const std::vector<double>& state);

  const ScheduleOptions& options() const { return options_; }
  int64_t warmup_steps() const { return warmup_steps_; }

 private:
  double scheduled_lr(int64_t step) const;  // the rate without SWA

  ScheduleOptions options_;
  int64_t warmup_steps_ = 0;
  double plateau_factor_ = 1.0, best_ = 0;
  int64_t bad_epochs_ = 0, cooldown_left_ = 0;
};

// The linear scaling rule (Goyal et al.): lr * global_batch / reference_batch; lr itself when
// reference_batch is 0.
double linear_scaled_lr(double lr, int64_t global_batch, int64_t reference_batch);

// The schedule a config describes ([optim] lr, [schedule] *), for a run of `steps_per_epoch` steps
// per epoch with `global_batch` images per optimizer step (for the linear scaling rule).
ScheduleOptions schedule_options(const Config& config, int64_t steps_per_epoch, int64_t global_batch);

}  // namespace cnn::train
