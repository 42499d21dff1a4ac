// The checks of a resumed run (see resume.h).
#include "train/resume.h"

#include <cmath>
#include <optional>
#include <vector>

#include "engine/error.h"
#include "engine/names_in_words.h"
#include "train/checkpoint.h"
#include "train/config/config.h"
#include "train/config/schema.h"
#include "train/run_log.h"
#include "train/train_settings.h"

namespace cnn::train {

namespace {
// "[data] batch_size" for "data.batch_size".
std::string key_in_words(const std::string& name) {
  const size_t dot = name.find('.');
  std::string words = "[";
  words.append(name, 0, dot).append("] ").append(name, dot + 1);
  return words;
}

// "[a, b, c]"
std::string list_in_words(const std::vector<std::string>& names) { return "[" + names_in_words(names) + "]"; }
}  // namespace

int64_t steps_on_ranks(int64_t step, int64_t from_ranks, int64_t to_ranks) {
  if (from_ranks == to_ranks) return step;
  return static_cast<int64_t>(
      std::llround(static_cast<double>(step) * static_cast<double>(from_ranks) / static_cast<double>(to_ranks)));
}

std::string finished_run(const TrainingState& saved, const TrainSettings& settings) {
  const int64_t epochs = settings.loop.epochs, max_steps = settings.loop.max_steps;
  if (saved.epoch >= epochs)
    return "the run already finished: epoch " + std::to_string(saved.epoch) + "/" + std::to_string(epochs) +
           "; to train longer raise train.epochs";
  const int64_t step = steps_on_ranks(saved.step, saved.world_size, settings.distributed.world.world_size);
  if (max_steps > 0 && step >= max_steps)
    return "the run already finished: step " + std::to_string(step) + "/" + std::to_string(max_steps) +
           " (train.max_steps); to train longer raise train.max_steps or set it to 0";
  return "";
}

namespace {
// The checkpoint's resolved config, as this build's schema reads it; nothing, and why in
// `unreadable`, when it holds none or one with a key this build no longer knows.
std::optional<Config> checkpoint_config(const TrainingState& saved, const std::filesystem::path& checkpoint, std::string& unreadable) {
  unreadable = "it holds no config";
  if (saved.config.empty()) return std::nullopt;
  try {
    return Config::parse(saved.config, checkpoint.string() + " (its config)");
  } catch (const Error& e) {
    unreadable = std::string("its config cannot be read: ") + e.what();
    return std::nullopt;
  }
}

// Whether two written values of `spec` mean the same: "0.02" and "2e-2", "true" and "yes", "1, 2"
// and "1,2" do.
bool same_value(const KeySpec& spec, const std::string& a, const std::string& b) {
  if (a == b) return true;
  const auto same_numbers = [](const std::vector<std::string>& x, const std::vector<std::string>& y) {
    if (x.size() != y.size()) return false;
    for (size_t i = 0; i < x.size(); ++i) {
      double u = 0, v = 0;
      if (!parse_real(x[i], u) || !parse_real(y[i], v) || u != v) return false;
    }
    return true;
  };
  switch (spec.type) {
    case KeyType::boolean: {
      bool u = false, v = false;
      return parse_bool(a, u) && parse_bool(b, v) && u == v;
    }
    case KeyType::integer:
    case KeyType::real: return !a.empty() && !b.empty() && same_numbers({a}, {b});
    case KeyType::integer_list:
    case KeyType::real_list: return same_numbers(split_list(a), split_list(b));
    case KeyType::text_list: return split_list(a) == split_list(b);
    default: return false;
  }
}

std::string shown(const std::string& value) { return value.empty() ? "(empty)" : value; }
}  // namespace

std::optional<ResumedConfig> resumed_config(const Config& given, const TrainingState& saved, const std::filesystem::path& checkpoint) {
  std::string unreadable;
  std::optional<Config> run = checkpoint_config(saved, checkpoint, unreadable);
  if (!run) return std::nullopt;
  ResumedConfig resumed{*run, {}};
  for (const KeySpec& spec : config_schema()) {
    const std::string name = spec.name();
    if (!given.given(name)) continue;  // left out: the run's value stays
    if (name == "run.name" || name == "run.dir") continue;  // where the run is: the folder resumed
    const std::string& now = given.written(name);
    const std::string& then = run->written(name);
    resumed.config.set(name, now, given.origin(name));
    if (!same_value(spec, now, then))
      resumed.changes.push_back(key_in_words(name) + " = " + shown(now) + " (" + given.origin(name) + "); the run had " + shown(then));
  }
  // A longer or shorter run keeps its cosine: re-fitting it to the new length would move the rate
  // at the resumed step (from near min_lr back up, for a longer run).
  const Config& c = resumed.config;
  const int64_t run_epochs = run->integer("train.epochs"), epochs = c.integer("train.epochs");
  if (epochs != run_epochs && c.text("schedule.name") == "warmup_cosine" && !given.given("schedule.epochs")) {
    const int64_t length = run->optional_integer("schedule.epochs").value_or(run_epochs);
    resumed.config.set("schedule.epochs", std::to_string(length), "the run's schedule length");
    const auto epochs_in_words = [](int64_t from, int64_t to) {
      return from == to ? "epoch " + std::to_string(from) : "epochs " + std::to_string(from) + "-" + std::to_string(to);
    };
    resumed.changes.push_back("the warmup_cosine keeps the run's length of " + std::to_string(length) +
                              (length == 1 ? " epoch" : " epochs") +
                              (epochs > length ? ", so " + epochs_in_words(length + 1, epochs) + (epochs == length + 1 ? " trains" : " train") +
                                                     " at [schedule] min_lr = " +
                                                     c.written("schedule.min_lr")
                                               : "") +
                              "; to fit it to " + std::to_string(epochs) + " epochs give [schedule] epochs = " + std::to_string(epochs) +
                              " (the rate at the resumed step then changes)");
  }
  return resumed;
}

void check_resume_keys(const TrainingState& saved, const std::filesystem::path& checkpoint, const TrainSettings& settings,
                       RunLog& log) {
  const bool anyway = settings.run.resume_anyway;
  const std::string refused = "cannot resume from " + checkpoint.string() + ": ";
  std::string unreadable;
  const std::optional<Config> then = checkpoint_config(saved, checkpoint, unreadable);
  if (!then) {
    CNN_CHECK(anyway, refused, unreadable, "; set [checkpoint] resume_anyway = true to resume without comparing the configs");
    log.warn("resuming from " + checkpoint.string() + " without comparing the configs: " + unreadable);
    return;
  }
  std::vector<std::string> changed;
  const std::vector<ResumeKey> before = resume_keys(*then);
  for (size_t i = 0; i < before.size(); ++i) {
    const ResumeKey& now = settings.run.resume_keys[i];
    if (now.value == before[i].value) continue;
    if (anyway)
      log.warn("resuming with " + key_in_words(now.name) + " = " + now.value + " (" + now.origin +
               "); the checkpoint was trained with " + before[i].value + " ([checkpoint] resume_anyway = true)");
    else
      changed.push_back(key_in_words(now.name) + ": " + before[i].value + " in the checkpoint, " + now.value + " now (" +
                        now.origin + ")");
  }
  if (changed.empty()) return;
  std::string message = refused + "the config changes " + std::to_string(changed.size()) +
                        (changed.size() == 1 ? " key" : " keys") + " the checkpoint was trained with:";
  for (const std::string& line : changed) message += "\n  " + line;
  throw Error(message +
              "\nwith them changed the run would not continue the same training: put them back, start a fresh run "
              "(without --resume), or set [checkpoint] resume_anyway = true to resume with the new values");
}

void check_resume_point(const TrainingState& saved, const std::filesystem::path& checkpoint, const std::filesystem::path& run_dir) {
  const std::string refused = "cannot resume from " + checkpoint.string() + ": ";
  const std::filesystem::path last = last_checkpoint_path(run_dir);
  CNN_CHECK(saved.weights == "live", refused, "it holds the ", saved.weights,
            " weights (the averaged weights that won a validation), not the live weights and optimizer state training "
            "continues from; resume from ", last.string(), ", or start a new run from these weights with [model] pretrained = ",
            checkpoint.string());
  std::error_code ignored;
  if (std::filesystem::equivalent(checkpoint, last, ignored) || !std::filesystem::exists(last, ignored)) return;
  const TrainingState latest = load_checkpoint(last);
  CNN_CHECK(latest.step <= saved.step, refused, "it is at step ", saved.step, " (epoch ", saved.epoch, ") while ", last.string(),
            " is at step ", latest.step, " (epoch ", latest.epoch, "); resuming it would rewind the run and write its later "
            "epochs' records again. Resume from ", last.string(), ", or copy ", checkpoint.filename().string(),
            " into a new folder to branch from it");
}

void check_resume_classes(const TrainingState& saved, const std::filesystem::path& checkpoint,
                          const std::vector<std::string>& data_classes, const std::string& data_spec) {
  // Another class count is refused with the model's check (restore_learner), which names num_classes.
  if (saved.class_names.size() != data_classes.size() || saved.class_names == data_classes) return;
  throw Error("cannot resume from " + checkpoint.string() + ": it was trained on the classes " + list_in_words(saved.class_names) +
              ", and " + data_spec + " has the classes " + list_in_words(data_classes) +
              "; resume on the same data, or start a new run (with [model] pretrained to keep the weights)");
}

}  // namespace cnn::train
