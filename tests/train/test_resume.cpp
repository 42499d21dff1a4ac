// Resuming a run, where it must not go on: a finished run resumed does nothing and leaves its files
// as they were; a checkpoint of another model or class count is refused before the run folder is
// written; a changed batch size, seed, image size, precision or accumulation is refused, naming
// each key with both values, unless [checkpoint] resume_anyway asks for a warning instead.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "engine/error.h"
#include "error_message.h"
#include "train/config/config.h"
#include "train/small_run.h"
#include "train/trainer.h"

using namespace cnn;
using namespace cnn::train;
using namespace cnn::train::testing;

namespace {
// Every file of a run folder with its bytes and modification time.
struct FileState {
  std::string bytes;
  std::filesystem::file_time_type modified;
};
std::map<std::string, FileState> snapshot(const std::filesystem::path& dir) {
  std::map<std::string, FileState> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    std::ifstream in(entry.path(), std::ios::binary);
    std::ostringstream bytes;
    bytes << in.rdbuf();
    files[entry.path().filename().string()] = {bytes.str(), std::filesystem::last_write_time(entry.path())};
  }
  return files;
}

void check_unchanged(const std::map<std::string, FileState>& before, const std::filesystem::path& dir) {
  const std::map<std::string, FileState> after = snapshot(dir);
  for (const auto& [name, state] : after) {
    INFO(name);
    CHECK(before.count(name) == 1);  // no file added
  }
  for (const auto& [name, state] : before) {
    INFO(name);
    REQUIRE(after.count(name) == 1);
    CHECK(after.at(name).bytes == state.bytes);
    CHECK(after.at(name).modified == state.modified);
  }
}

size_t count(const std::string& text, const std::string& part) {
  size_t n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}
}  // namespace

TEST_CASE("resume: a finished run resumed does nothing, says so and leaves every file as it was") {
  SmallRun run("finished", 128, 32, 1, 2);  // 4 batches of 32 per epoch, 2 epochs
  const TrainSummary done = run_training(Config::parse(run.text, "test.ini"), run.opts);
  REQUIRE(done.steps == 8);
  const auto before = snapshot(done.run_dir);
  for (const char* file : {"last.h5", "best.h5", "model.safetensors", "config.ini", "classes.txt", "train.log"})
    REQUIRE(before.count(file) == 1);

  TrainRunOptions resume = run.opts;
  resume.resume = done.run_dir.string();
  std::ostringstream shown;
  resume.console = &shown;
  const TrainSummary again = run_training(Config::parse(run.text, "test.ini"), resume);
  CHECK(again.run_dir == done.run_dir);
  CHECK(again.epochs_run == 0);
  CHECK(again.steps == 8);
  CHECK(shown.str().find("the run already finished: epoch 2/2; to train longer raise train.epochs") != std::string::npos);
  check_unchanged(before, done.run_dir);

  // Stopped by max_steps inside an epoch, the run is finished as long as max_steps stays.
  const Config stopped = Config::parse(run.text, "test.ini", {"train.max_steps=3", "run.name=stopped"});
  const TrainSummary first = run_training(stopped, run.opts);
  REQUIRE(first.steps == 3);
  const auto stopped_before = snapshot(first.run_dir);
  resume.resume = first.run_dir.string();
  shown.str("");
  const TrainSummary stopped_again = run_training(stopped, resume);
  CHECK(stopped_again.steps == 3);
  CHECK(shown.str().find("the run already finished: step 3/3 (train.max_steps); to train longer raise train.max_steps") !=
        std::string::npos);
  check_unchanged(stopped_before, first.run_dir);

  // Raised, epochs train on from the checkpoint.
  resume.resume = done.run_dir.string();
  const TrainSummary longer = run_training(Config::parse(run.text, "test.ini", {"train.epochs=3"}), resume);
  CHECK(longer.epochs_run == 1);
  CHECK(longer.steps == 12);
}

TEST_CASE("resume: a checkpoint of another model or class count is refused before anything in the run folder is written") {
  SmallRun run("refused", 128, 32, 1, 2);
  const TrainSummary first = run_training(Config::parse(run.text, "test.ini", {"train.epochs=1"}), run.opts);
  const auto before = snapshot(first.run_dir);
  REQUIRE(before.count("config.ini") == 1);
  REQUIRE(before.count("classes.txt") == 1);
  TrainRunOptions resume = run.opts;
  resume.resume = first.run_dir.string();
  for (const std::string other : {"model.num_classes=7", "model.name=mlp"}) {
    CAPTURE(other);
    CHECK_THROWS_WITH_AS(run_training(Config::parse(run.text, "test.ini", {"train.epochs=2", other}), resume),
                         doctest::Contains("check [model] name and num_classes"), Error);
    check_unchanged(before, first.run_dir);
  }
}

TEST_CASE("resume: a changed batch size, seed, image size, precision or accumulate is refused, naming each, or warned about with resume_anyway") {
  SmallRun run("changed", 128, 32, 1, 2);
  const TrainSummary first = run_training(Config::parse(run.text, "test.ini", {"train.epochs=1"}), run.opts);
  REQUIRE(first.steps == 4);
  const auto before = snapshot(first.run_dir);
  TrainRunOptions resume = run.opts;
  resume.resume = first.run_dir.string();
  const std::string refused = cnn::testing::error_message([&] {
    run_training(Config::parse(run.text, "test.ini",
                               {"train.epochs=2", "data.batch_size=16", "train.seed=4", "data.image_size=32", "precision.mode=bf16",
                                "train.accumulate=2"}),
                 resume);
  });
  INFO(refused);
  CHECK(refused.find("cannot resume from " + (first.run_dir / "last.h5").string() +
                     ": the config changes 5 keys the checkpoint was trained with") != std::string::npos);
  CHECK(refused.find("\n  [data] batch_size: 32 in the checkpoint, 16 now (--set)") != std::string::npos);
  CHECK(refused.find("\n  [train] seed: 3 in the checkpoint, 4 now (--set)") != std::string::npos);
  CHECK(refused.find("\n  [data] image_size: 28 in the checkpoint, 32 now (--set)") != std::string::npos);
  CHECK(refused.find("\n  [precision] mode: fp32 in the checkpoint, bf16 now (--set)") != std::string::npos);
  CHECK(refused.find("\n  [train] accumulate: 1 in the checkpoint, 2 now (--set)") != std::string::npos);
  CHECK(refused.find("set [checkpoint] resume_anyway = true") != std::string::npos);
  check_unchanged(before, first.run_dir);

  // Keys outside the five may change (a resume that raises the epochs or changes the rate is normal).
  // With resume_anyway, each changed key is a warning, once, and the run goes on with the new values.
  std::ostringstream shown;
  resume.console = &shown;
  const TrainSummary anyway = run_training(
      Config::parse(run.text, "test.ini",
                    {"train.epochs=2", "optim.lr=0.01", "data.batch_size=16", "train.seed=4", "checkpoint.resume_anyway=true"}),
      resume);
  CHECK(anyway.steps == 4 + 8);  // epoch 2 in 8 batches of 16
  const std::string text = shown.str();
  INFO(text);
  CHECK(count(text, "warning: resuming with [data] batch_size = 16 (--set); the checkpoint was trained with 32") == 1);
  CHECK(count(text, "warning: resuming with [train] seed = 4 (--set); the checkpoint was trained with 3") == 1);
  CHECK(count(text, "warning: resuming with") == 2);
  // Every key given again that differs from the run's own config is named once, with both values.
  CHECK(count(text, "goes on, changed by what was given again:") == 1);
  CHECK(count(text, "\n  [optim] lr = 0.01 (--set); the run had 0.02") == 1);
  CHECK(count(text, "\n  [train] epochs = 2 (--set); the run had 1") == 1);
}

TEST_CASE("resume: the run's own config goes on, keys left out keep the run's values and the cosine keeps its length") {
  // The run had --set optim.momentum=0.8 and ema.decay=0.9; resumed with the original INI and only
  // train.epochs=2, it used to take the INI's defaults (no EMA, momentum 0.9) and re-fit the cosine to
  // 2 epochs, so that the rate jumped from about 0 back up to half the base rate.
  SmallRun run("own_config", 128, 32, 1, 2);  // 4 steps of 32 per epoch
  const TrainSummary first =
      run_training(Config::parse(run.text, "test.ini", {"train.epochs=1", "optim.momentum=0.8", "ema.decay=0.9", "run.name=own"}),
                   run.opts);
  REQUIRE(first.steps == 4);
  TrainRunOptions resume = run.opts;
  resume.resume = first.run_dir.string();
  std::ostringstream shown;
  resume.console = &shown;
  const TrainSummary second = run_training(Config::parse(run.text, "test.ini", {"train.epochs=2"}), resume);
  CHECK(second.steps == 8);
  CHECK(second.last_ema_top1 >= 0);  // the EMA goes on (it is validated)
  const Config resolved = Config::load(first.run_dir / "config.ini");
  CHECK(resolved.real("optim.momentum") == 0.8);
  CHECK(resolved.real("ema.decay") == 0.9);
  CHECK(resolved.integer("train.epochs") == 2);
  CHECK(resolved.optional_integer("schedule.epochs") == 1);
  const std::string text = shown.str();
  INFO(text);
  CHECK(count(text, "\n  [train] epochs = 2 (--set); the run had 1") == 1);
  CHECK(count(text, "the warmup_cosine keeps the run's length of 1 epoch, so epoch 2 trains at [schedule] min_lr = 0; to fit it "
                    "to 2 epochs give [schedule] epochs = 2") == 1);
  CHECK(count(text, "(to keep the run's values, resume with its own " + (first.run_dir / "config.ini").string() + ")") == 1);
  CHECK(count(text, "momentum") == 0);  // not given again: not a change
  CHECK(count(text, "[run] name") == 0);  // the INI's name is not the folder's: the folder stays the run's
  // Epoch 2 trains at min_lr, where the cosine ended; re-fitted, the rate would be about half of 0.02.
  std::ifstream metrics(first.run_dir / "metrics.jsonl");
  double last_lr = -1;
  for (std::string line; std::getline(metrics, line);)
    if (line.find("\"kind\":\"epoch\"") != std::string::npos && line.find("\"epoch\":2") != std::string::npos)
      last_lr = std::stod(line.substr(line.find("\"lr\":") + 5));
  CHECK(last_lr == 0.0);

  // Given again with another value, in a file: named with its line, and taken.
  SmallRun again("own_config_file", 128, 32, 1, 2);
  const TrainSummary third = run_training(Config::parse(again.text, "test.ini", {"train.epochs=1", "optim.lr=0.05"}), again.opts);
  TrainRunOptions resume_third = again.opts;
  resume_third.resume = third.run_dir.string();
  std::ostringstream said;
  resume_third.console = &said;
  run_training(Config::parse(again.text, "test.ini", {"train.epochs=2", "schedule.epochs=2"}), resume_third);
  const std::string words = said.str();
  INFO(words);
  CHECK(count(words, "\n  [optim] lr = 0.02 (test.ini:") == 1);
  CHECK(count(words, "the run had 0.05") == 1);
  CHECK(count(words, "warmup_cosine keeps") == 0);  // [schedule] epochs was given
  CHECK(Config::load(third.run_dir / "config.ini").real("optim.lr") == 0.02);
}
