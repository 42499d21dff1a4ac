// What a resumed run takes from its checkpoint and checks there before it changes anything in the
// run folder: the run's own config under the keys given again; whether
// the run already finished (then it does nothing at all), and whether the config changes a key
// the checkpoint was trained with (the batch size, seed, image size, precision or accumulation),
// which is refused unless [checkpoint] resume_anyway asks for a warning per key instead.
#pragma once
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "train/config/config.h"

namespace cnn::train {

struct TrainingState;
struct TrainSettings;
class RunLog;

// A step count of a run on `from_ranks` ranks, in steps of the global batch of `to_ranks` (the same
// number of samples).
int64_t steps_on_ranks(int64_t step, int64_t from_ranks, int64_t to_ranks);

// "" while the run of `saved` has training left under `settings`; else what to say, e.g. "the run
// already finished: epoch 8/8; to train longer raise train.epochs".
std::string finished_run(const TrainingState& saved, const TrainSettings& settings);

// The config a resume trains with: the run's own (the resolved config its checkpoint holds), with
// the keys the user gave again on top, those written in the INI given or set with --set (keys the
// INI leaves out keep the run's values, not their defaults; run.name and run.dir stay the run's, as
// its folder does). `changes` names every given key whose
// value differs from the run's, with both values and where the new one came from. When
// train.epochs changes and [schedule] epochs is not given, the warmup_cosine keeps the run's length
// (later epochs train at min_lr) and `changes` says so. Nothing when the checkpoint holds no
// config this build can read (check_resume_keys then decides).
struct ResumedConfig {
  Config config;
  std::vector<std::string> changes;
};
std::optional<ResumedConfig> resumed_config(const Config& given, const TrainingState& saved, const std::filesystem::path& checkpoint);

// A cnn::Error naming every resume key (train_settings.h) whose value differs from the one in the
// config of `saved` (read from `checkpoint`), with both values; with resume_anyway a warning per
// such key in `log` instead.
void check_resume_keys(const TrainingState& saved, const std::filesystem::path& checkpoint, const TrainSettings& settings,
                       RunLog& log);

// A cnn::Error when `checkpoint` is not a point the run in `run_dir` can continue from: averaged
// weights (a best.h5 chosen by the EMA's or SWA's validation holds them in place of the live
// weights), or a point before the folder's last.h5 (resuming there would rewind the run and write
// its later epochs' records again).
void check_resume_point(const TrainingState& saved, const std::filesystem::path& checkpoint, const std::filesystem::path& run_dir);

// A cnn::Error, naming both lists, when the training data's class names are not those the
// checkpoint was trained on (best.h5 would name one list and last.h5 another). Another number of
// classes is left to the model's check, which names [model] num_classes.
void check_resume_classes(const TrainingState& saved, const std::filesystem::path& checkpoint,
                          const std::vector<std::string>& data_classes, const std::string& data_spec);

}  // namespace cnn::train
