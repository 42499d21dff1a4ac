// Learning-rate schedules (train/schedule/lr_schedule.h): each curve at chosen steps against values
// from its formula, warmup, ReduceLROnPlateau's patience/threshold/cooldown bookkeeping and its
// checkpoint state, the linear scaling rule, and options read from a config.
#include <doctest/doctest.h>

#include <cmath>
#include <numbers>

#include "engine/error.h"
#include "train/config/config.h"
#include "train/schedule/lr_schedule.h"

using namespace cnn;
using namespace cnn::train;

namespace {
ScheduleOptions ten_by_ten(ScheduleKind kind) {
  ScheduleOptions o;
  o.kind = kind;
  o.base_lr = 0.1;
  o.steps_per_epoch = 10;
  o.epochs = 10;
  return o;
}
}  // namespace

TEST_CASE("warmup then cosine: linear ramp, cosine from the base rate to min_lr") {
  ScheduleOptions o = ten_by_ten(ScheduleKind::warmup_cosine);
  o.warmup_epochs = 1;
  o.min_lr = 0.001;
  const LrSchedule s(o);
  CHECK(s.warmup_steps() == 10);
  CHECK(s.lr(0) == doctest::Approx(0.01));   // (0 + 1) / 10 of the cosine's starting rate
  CHECK(s.lr(4) == doctest::Approx(0.05));
  CHECK(s.lr(9) == doctest::Approx(0.1));
  CHECK(s.lr(10) == doctest::Approx(0.1));   // cosine starts after warmup
  CHECK(s.lr(55) == doctest::Approx(0.001 + 0.099 * 0.5));  // half way through the 90 cosine steps
  CHECK(s.lr(10 + 30) == doctest::Approx(0.001 + 0.099 * 0.5 * (1 + std::cos(std::numbers::pi / 3))));
  CHECK(s.lr(100) == doctest::Approx(0.001));
  CHECK(s.lr(150) == doctest::Approx(0.001));  // past the end: stays at min_lr
  ScheduleOptions from_half = o;
  from_half.warmup_start_factor = 0.5;
  CHECK(LrSchedule(from_half).lr(0) == doctest::Approx(0.1 * (0.5 + 0.5 * 0.1)));
  ScheduleOptions no_warmup = ten_by_ten(ScheduleKind::warmup_cosine);
  CHECK(LrSchedule(no_warmup).lr(0) == doctest::Approx(0.1));
  CHECK(LrSchedule(no_warmup).lr(50) == doctest::Approx(0.05));
}

TEST_CASE("step, multistep, exponential and constant decay at epoch boundaries") {
  ScheduleOptions step = ten_by_ten(ScheduleKind::step);
  step.step_size = 3;
  const LrSchedule s(step);
  CHECK(s.lr(29) == doctest::Approx(0.1));
  CHECK(s.lr(30) == doctest::Approx(0.01));
  CHECK(s.lr(59) == doctest::Approx(0.01));
  CHECK(s.lr(60) == doctest::Approx(0.001));

  ScheduleOptions multi = ten_by_ten(ScheduleKind::multistep);
  multi.milestones = {2, 5};
  const LrSchedule m(multi);
  CHECK(m.lr(19) == doctest::Approx(0.1));
  CHECK(m.lr(20) == doctest::Approx(0.01));
  CHECK(m.lr(49) == doctest::Approx(0.01));
  CHECK(m.lr(50) == doctest::Approx(0.001));

  ScheduleOptions exponential = ten_by_ten(ScheduleKind::exponential);
  exponential.gamma = 0.5;
  CHECK(LrSchedule(exponential).lr(25) == doctest::Approx(0.025));
  CHECK(LrSchedule(exponential).lr(9) == doctest::Approx(0.1));

  ScheduleOptions constant = ten_by_ten(ScheduleKind::constant);
  constant.warmup_epochs = 0.5;  // warmup applies to any schedule
  const LrSchedule c(constant);
  CHECK(c.lr(0) == doctest::Approx(0.02));
  CHECK(c.lr(4) == doctest::Approx(0.1));
  CHECK(c.lr(99) == doctest::Approx(0.1));
}

TEST_CASE("plateau: decays after `patience` epochs without relative improvement, then cools down") {
  ScheduleOptions o = ten_by_ten(ScheduleKind::plateau);
  o.patience = 2;
  o.cooldown = 1;
  o.threshold = 0.01;
  o.min_lr = 0.002;
  LrSchedule s(o);
  CHECK_FALSE(s.observe(1.0));    // best 1.0
  CHECK_FALSE(s.observe(0.995));  // not 1% better: bad epoch 1
  CHECK_FALSE(s.observe(0.98));   // 2% better: best, bad epochs reset
  CHECK_FALSE(s.observe(0.99));   // bad 1
  CHECK_FALSE(s.observe(0.99));   // bad 2
  CHECK(s.lr(0) == doctest::Approx(0.1));
  CHECK(s.observe(0.99));         // bad 3 > patience: decay
  CHECK(s.lr(0) == doctest::Approx(0.01));
  CHECK_FALSE(s.observe(0.99));   // cooling down: does not count
  CHECK_FALSE(s.observe(0.99));   // bad 1
  CHECK_FALSE(s.observe(0.99));   // bad 2
  const std::vector<double> saved = s.state();
  CHECK(s.observe(0.99));         // decay again, floored at min_lr
  CHECK(s.lr(0) == doctest::Approx(0.002));
  LrSchedule resumed(o);
  resumed.load_state(saved);
  CHECK(resumed.lr(0) == doctest::Approx(0.01));
  CHECK(resumed.observe(0.99));   // the resumed run decays at the same epoch
  CHECK(resumed.lr(0) == doctest::Approx(0.002));

  ScheduleOptions top1 = o;
  top1.plateau_maximize = true;
  LrSchedule acc(top1);
  CHECK_FALSE(acc.observe(0.50));
  CHECK_FALSE(acc.observe(0.60));  // higher is better
  CHECK_FALSE(acc.observe(0.60));
  CHECK_FALSE(acc.observe(0.60));
  CHECK(acc.observe(0.55));
  CHECK_FALSE(LrSchedule(ten_by_ten(ScheduleKind::step)).observe(1.0));  // other schedules ignore metrics
}

TEST_CASE("linear scaling rule, and schedule options from a config") {
  CHECK(linear_scaled_lr(0.1, 1024, 256) == doctest::Approx(0.4));
  CHECK(linear_scaled_lr(0.1, 1024, 0) == 0.1);
  const Config c = Config::parse(
      "[optim]\nlr = 0.1\n[schedule]\nname = multistep\nmilestones = 3, 6\nreference_batch_size = 256\n"
      "warmup_epochs = 0.5\n[train]\nepochs = 8\n",
      "sched.ini");
  const ScheduleOptions o = schedule_options(c, 100, 512);
  CHECK(o.kind == ScheduleKind::multistep);
  CHECK(o.base_lr == doctest::Approx(0.2));
  CHECK(o.milestones == std::vector<int64_t>{3, 6});
  const LrSchedule s(o);
  CHECK(s.warmup_steps() == 50);
  CHECK(s.lr(300) == doctest::Approx(0.02));
  CHECK_THROWS_WITH_AS(parse_schedule_kind("cosine"), doctest::Contains("unknown learning-rate schedule 'cosine'"), Error);
  ScheduleOptions bad = ten_by_ten(ScheduleKind::constant);
  bad.steps_per_epoch = 0;
  CHECK_THROWS_AS(LrSchedule{bad}, Error);
}

// Each of these passed its own key's range and trained something other than what was asked: a
// cosine rising from lr to min_lr, a plateau schedule without a metric to watch, and lr scaled to
// 200 by reference_batch_size = 1.
TEST_CASE("schedule options: settings that contradict each other are refused with file:line") {
  const auto refusal = [](const std::string& text, int64_t global_batch = 256) {
    try {
      schedule_options(Config::parse(text, "sched.ini"), 100, global_batch);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  const std::string rising = refusal("[optim]\nlr = 1e-4\n[schedule]\nmin_lr = 1e-3\n");
  CHECK(rising.find("sched.ini:4: [schedule] min_lr = 0.001 is above the learning rate 0.0001") != std::string::npos);
  CHECK(rising.find("the cosine would rise") != std::string::npos);
  const std::string plateau = refusal("[schedule]\nname = plateau\n");
  CHECK(plateau.find("sched.ini:2: [schedule] name = plateau watches the validation metric") != std::string::npos);
  CHECK(refusal("[schedule]\nname = plateau\n[data]\nval_path = /v\n") == "(no error)");
  const std::string scaled = refusal("[optim]\nlr = 0.8\n[schedule]\nreference_batch_size = 1\n", 256);
  CHECK(scaled.find("the learning rate would be 204.8") != std::string::npos);
  CHECK(scaled.find("reference_batch_size 1 (sched.ini:4)") != std::string::npos);
  CHECK(refusal("[optim]\nlr = 0.1\n[schedule]\nmin_lr = 0.001\n") == "(no error)");
}
