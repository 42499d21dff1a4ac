// The small training run of the tests (see small_run.h).
#include "train/small_run.h"

#include <doctest/doctest.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

#include "data/encode.h"
#include "engine/cnn.h"
#include "engine/io/safetensors.h"
#include "train/config/config.h"
#include "train/distributed/data_parallel.h"
#include "train/learner.h"
#include "train/log/console.h"
#include "train/run_log.h"
#include "train/train_settings.h"
#include "train/train_step.h"

namespace cnn::train::testing {

namespace {
void write_be32(std::ofstream& out, uint32_t v) {
  const unsigned char b[4] = {static_cast<unsigned char>(v >> 24), static_cast<unsigned char>(v >> 16),
                              static_cast<unsigned char>(v >> 8), static_cast<unsigned char>(v)};
  out.write(reinterpret_cast<const char*>(b), 4);
}
}  // namespace

ScratchDir::ScratchDir(const std::string& name)
    : path(std::filesystem::temp_directory_path() / ("cnn_trainer_" + name + "_" + std::to_string(::getpid()))) {
  std::filesystem::remove_all(path);
  std::filesystem::create_directories(path);
}
ScratchDir::~ScratchDir() { std::filesystem::remove_all(path); }

void write_idx_split(const std::filesystem::path& dir, const std::string& prefix, int count, uint32_t seed) {
  std::ofstream images(dir / (prefix + "-images-idx3-ubyte"), std::ios::binary), labels(dir / (prefix + "-labels-idx1-ubyte"), std::ios::binary);
  write_be32(images, 0x803);
  write_be32(images, static_cast<uint32_t>(count));
  write_be32(images, 28);
  write_be32(images, 28);
  write_be32(labels, 0x801);
  write_be32(labels, static_cast<uint32_t>(count));
  uint32_t state = seed;
  for (int i = 0; i < count; ++i) {
    const int label = i % 4;
    const int y0 = label / 2 * 14 + 3, x0 = label % 2 * 14 + 3;
    for (int y = 0; y < 28; ++y)
      for (int x = 0; x < 28; ++x) {
        state = state * 1664525u + 1013904223u;
        const bool inside = y >= y0 && y < y0 + 8 && x >= x0 && x < x0 + 8;
        const char pixel = static_cast<char>(inside ? 200 + (state >> 28) : (state >> 26));
        images.put(pixel);
      }
    labels.put(static_cast<char>(label));
  }
}

void write_image_folder(const std::filesystem::path& root, const std::vector<std::string>& names, int per_class) {
  for (size_t k = 0; k < names.size(); ++k) {
    std::filesystem::create_directories(root / names[k]);
    for (int i = 0; i < per_class; ++i) {
      data::Image img(28, 28, 1);
      for (int y = 0; y < 28; ++y)
        for (int x = 0; x < 28; ++x) {
          const bool inside = (y / 14) * 2 + (x / 14) == static_cast<int>(k) && y % 14 > 3 && x % 14 > 3;
          img.at(y, x, 0) = static_cast<uint8_t>(inside ? 220 : (x * 7 + y * 3 + i) % 40);
        }
      const std::vector<uint8_t> png = data::encode_image(img, data::ImageFormat::png);
      std::ofstream(root / names[k] / (std::to_string(i) + ".png"), std::ios::binary)
          .write(reinterpret_cast<const char*>(png.data()), static_cast<std::streamsize>(png.size()));
    }
  }
}

std::string config_text(const std::filesystem::path& data, const std::filesystem::path& runs) {
  std::ostringstream c;
  c << "[model]\nname = compact_cnn\nnum_classes = 4\nin_channels = 1\n"
    << "[data]\nformat = idx\npath = " << data.string() << "\nval_path = " << data.string()
    << "\nbatch_size = 32\nimage_size = 28\ncrop_pct = 1.0\nmean = 0.2\nstd = 0.3\nworkers = 2\n"
    << "[augment]\nrandom_resized_crop = false\nhflip = 0\n"  // a flip would swap the classes
    << "[optim]\nname = sgd\nlr = 0.02\n"
    << "[schedule]\nname = warmup_cosine\nwarmup_epochs = 0.5\n"
    << "[train]\nepochs = 2\ndevice = cpu\nseed = 3\nthreads = 2\n"
    << "[log]\nlevel = quiet\nevery_steps = 4\n"
    << "[run]\ndir = " << runs.string() << "\nname = test\n";
  return c.str();
}

SmallRun::SmallRun(const std::string& name, int train_images, int test_images, uint32_t train_seed, uint32_t test_seed)
    : dir(name) {
  write_idx_split(dir.path, "train", train_images, train_seed);
  write_idx_split(dir.path, "t10k", test_images, test_seed);
  text = config_text(dir.path, dir.path / "runs");
  opts.console = &quiet;
}

void check_steps_never_wait_for_the_device(const std::vector<std::string>& overrides) {
  ScratchDir dir("steps_no_wait");
  const TrainSettings settings = from_config(Config::parse(config_text(dir.path, dir.path / "runs"), "test.ini", overrides));
  std::ostringstream quiet;
  Console console(quiet, LogLevel::normal, ProgressMode::lines, false);
  RunLog log(console, {});
  Learner learner = build_learner(settings, 4, log);
  DataParallel single(settings);
  const Device& device = settings.compute.device;
  const Tensor images = Tensor::randn({8, 28, 28, 1}, 3, settings.precision.compute, device);
  const Tensor labels = Tensor::from_vector<int64_t>({0, 1, 2, 3, 3, 2, 1, 0}, {8}).to(device);
  for (int64_t step = 0; step < 3; ++step) {
    HostSyncCheck check("the training step");
    forward_backward(learner, MicroBatch{.images = images, .labels = labels, .epoch = 0, .index = step + 1}, settings);
    optimizer_step(learner, step, settings.optim.clip_grad_norm, {}, single);
  }
  const ScalerReadout after = learner.scaler.read();
  CHECK(after.last_norm > 0);
  CHECK(learner.optimizer->steps_of(learner.model->named_parameters()[0].name) == 3 - after.skipped_steps);
}

std::string read_text_file(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

namespace {
// Every tensor of the exported weights (parameters and buffers), as raw bytes by name.
std::map<std::string, std::vector<char>> weight_bytes(const std::filesystem::path& path) {
  std::map<std::string, std::vector<char>> out;
  for (const auto& [name, t] : io::load_safetensors(path).tensors) {
    const char* p = static_cast<const char*>(t.data());
    out[name] = std::vector<char>(p, p + t.nbytes());
  }
  return out;
}
}  // namespace

std::string check_graphs_train_as_eager(SmallRun& run, std::vector<std::string> overrides) {
  run.opts.record_step_losses = true;
  overrides.insert(overrides.begin(), "data.drop_last=false");
  overrides.push_back("run.name=eager");
  const TrainSummary eager = run_training(Config::parse(run.text, "test.ini", overrides), run.opts);
  overrides.back() = "run.name=graphs";
  overrides.push_back("train.cuda_graphs=true");
  const TrainSummary graphs = run_training(Config::parse(run.text, "test.ini", overrides), run.opts);
  REQUIRE(eager.step_losses.size() == graphs.step_losses.size());
  CHECK(std::memcmp(eager.step_losses.data(), graphs.step_losses.data(), eager.step_losses.size() * sizeof(double)) == 0);
  CHECK(eager.last_top1 == graphs.last_top1);
  CHECK(eager.last_val_loss == graphs.last_val_loss);
  const auto want = weight_bytes(eager.run_dir / "model.safetensors");
  const auto got = weight_bytes(graphs.run_dir / "model.safetensors");
  REQUIRE(want.size() == got.size());
  for (const auto& [name, bytes] : want) {
    INFO(name);
    CHECK(got.at(name) == bytes);
  }
  return read_text_file(graphs.run_dir / "train.log");
}

}  // namespace cnn::train::testing
