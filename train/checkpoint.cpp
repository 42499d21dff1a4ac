// Checkpoints as HDF5 tensor files: prefixes for the groups of tensors, attributes for the rest.
#include "train/checkpoint.h"

#include "data/packed_dataset.h"

#include "engine/error.h"
#include "engine/io/hdf5.h"

namespace cnn::train {

namespace {
constexpr const char* kFormat = "cnn-checkpoint";
constexpr int64_t kFormatVersion = 1;

const char* const kParams = "model/";
const char* const kBuffers = "buffers/";
const char* const kOptimizer = "optimizer/";
const char* const kEma = "ema/";
const char* const kSwa = "swa/";
const char* const kSchedule = "trainer/lr_schedule";
const char* const kScaler = "trainer/loss_scaler";

void add_prefixed(io::NamedTensors& out, const char* prefix, const io::NamedTensors& tensors) {
  for (const auto& [name, t] : tensors) out.emplace_back(prefix + name, t);
}

Tensor doubles_tensor(const std::vector<double>& values) {
  return Tensor::from_vector<double>(values, {static_cast<int64_t>(values.size())});
}
}  // namespace

void save_checkpoint(const std::filesystem::path& path, const TrainingState& state) {
  io::TensorFile file;
  add_prefixed(file.tensors, kParams, state.params);
  add_prefixed(file.tensors, kBuffers, state.buffers);
  add_prefixed(file.tensors, kOptimizer, state.optimizer);
  add_prefixed(file.tensors, kEma, state.ema);
  add_prefixed(file.tensors, kSwa, state.swa);
  file.tensors.emplace_back(kSchedule, doubles_tensor(state.lr_schedule));
  file.tensors.emplace_back(kScaler, doubles_tensor(state.loss_scaler));
  file.attributes["format"] = std::string(kFormat);
  file.attributes["format_version"] = kFormatVersion;
  file.attributes["epoch"] = state.epoch;
  file.attributes["step"] = state.step;
  file.attributes["samples_in_epoch"] = state.samples_in_epoch;
  file.attributes["world_size"] = state.world_size;
  file.attributes["seed"] = state.seed;
  file.attributes["best_metric"] = state.best_metric;
  file.attributes["best_epoch"] = state.best.epoch;
  file.attributes["best_weights"] = state.best.weights;
  file.attributes["best_top1"] = state.best.top1;
  file.attributes["best_top5"] = state.best.top5;
  file.attributes["best_loss"] = state.best.loss;
  file.attributes["config"] = state.config;
  file.attributes["class_names"] = state.class_names;
  file.attributes["ema_updates"] = state.ema_updates;
  file.attributes["swa_models"] = state.swa_models;
  file.attributes["weights"] = state.weights;
  io::save_hdf5(path, file);
}

namespace {
// The file's tensors; a packed dataset given where a checkpoint belongs is named as such (its
// class-name strings would otherwise be reported as an element type no tensor holds).
io::TensorFile load_checkpoint_file(const std::filesystem::path& path) {
  try {
    return io::load_hdf5(path);
  } catch (const Error&) {
    bool packed = false;
    try {
      packed = data::PackedDataset(path.string()).size() >= 0;
    } catch (const std::exception&) {
    }
    if (!packed) throw;
    throw Error(path.string() + " is a dataset packed by cnn_pack, not a checkpoint; give a run's best.h5 or last.h5 "
                "(the packed file is data: [data] path, or the images to predict)");
  }
}
}  // namespace

TrainingState load_checkpoint(const std::filesystem::path& path) {
  const io::TensorFile file = load_checkpoint_file(path);
  CNN_CHECK(file.has("format") && file.text("format") == kFormat, file.source,
            " is not a training checkpoint (no format = \"", kFormat,
            "\" attribute); to start from weights only, use [model] pretrained");
  CNN_CHECK(file.integer("format_version") == kFormatVersion, file.source, " has checkpoint format version ",
            file.integer("format_version"), "; this build reads version ", kFormatVersion);
  TrainingState state;
  for (const auto& [name, t] : file.tensors) {
    const auto take = [&](const char* prefix, io::NamedTensors& into) {
      const std::string p = prefix;
      if (name.compare(0, p.size(), p) != 0) return false;
      into.emplace_back(name.substr(p.size()), t);
      return true;
    };
    if (take(kParams, state.params) || take(kBuffers, state.buffers) || take(kOptimizer, state.optimizer) || take(kEma, state.ema) ||
        take(kSwa, state.swa))
      continue;
    if (name == kSchedule) state.lr_schedule = t.to_doubles();
    if (name == kScaler) state.loss_scaler = t.to_doubles();
  }
  state.epoch = file.integer("epoch");
  state.step = file.integer("step");
  if (file.has("samples_in_epoch")) state.samples_in_epoch = file.integer("samples_in_epoch");
  if (file.has("world_size")) state.world_size = file.integer("world_size");
  state.seed = file.unsigned_integer("seed");
  state.best_metric = file.real("best_metric");
  if (file.has("best_epoch")) {
    state.best = {.epoch = file.integer("best_epoch"),
                  .weights = file.text("best_weights"),
                  .top1 = file.real("best_top1"),
                  .top5 = file.real("best_top5"),
                  .loss = file.real("best_loss")};
  }
  state.config = file.text("config");
  state.class_names = file.texts("class_names");
  if (file.has("ema_updates")) state.ema_updates = file.integer("ema_updates");
  if (file.has("swa_models")) state.swa_models = file.integer("swa_models");
  if (file.has("weights")) state.weights = file.text("weights");
  return state;
}

std::filesystem::path last_checkpoint_path(const std::filesystem::path& run_dir) { return run_dir / "last.h5"; }
std::filesystem::path best_checkpoint_path(const std::filesystem::path& run_dir) { return run_dir / "best.h5"; }

}  // namespace cnn::train
