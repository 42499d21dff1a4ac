// TrainSettings in a data-parallel job: what a rank's launcher environment changes in the settings
// a config gives (train_settings.h).
#include <doctest/doctest.h>

#include <filesystem>
#include <sstream>

#include "engine/cuda_context.h"
#include "engine/test_io_support.h"
#include "layers/registry.h"
#include "layers/weights.h"
#include "train/config/config.h"
#include "train/learner.h"
#include "train/log/console.h"
#include "train/run_log.h"
#include "train/train_settings.h"
#include "error_message.h"

using namespace cnn;
using namespace cnn::train;
using cnn::testing::error_message;

namespace {
const char* kConfig =
    "[model]\nname = compact_cnn\nnum_classes = 10\nin_channels = 1\n"
    "[data]\nformat = idx\npath = /nonexistent\nbatch_size = 64\ndrop_last = false\n"
    "[optim]\nlr = 0.1\n[schedule]\nreference_batch_size = 256\n"
    "[train]\naccumulate = 2\ndevice = cuda\n";

distributed::World rank_of(int rank, int world_size) {
  distributed::World world;
  world.rank = rank;
  world.local_rank = rank;
  world.world_size = world_size;
  world.launcher = distributed::Launcher::mpirun;
  return world;
}
}  // namespace

TEST_CASE("settings of a rank: its own GPU, its shard, the global batch in the linear scaling rule") {
  const Config config = Config::parse(kConfig, "dp.ini");
  const TrainSettings alone = from_config(config);
  CHECK(alone.compute.device == Device::cuda(0));
  CHECK(alone.data.loader.world_size == 1);
  CHECK(alone.optim.schedule.base_lr == doctest::Approx(0.1 * 64 * 2 / 256));
  CHECK(alone.data.loader.max_image_pixels == 89478485);
  CHECK(alone.data.max_corrupt_fraction == 0.1);
  const TrainSettings limits =
      from_config(Config::parse(kConfig, "dp.ini", {"data.max_image_pixels=0", "data.max_corrupt_fraction=1"}));
  CHECK(limits.data.loader.max_image_pixels == 0);
  CHECK(limits.data.max_corrupt_fraction == 1);

  const TrainSettings third = from_config(config, rank_of(2, 4));
  CHECK(third.compute.device == Device::cuda(2));  // cuda: the rank's local GPU
  CHECK(third.data.loader.device == Device::cuda(2));
  CHECK(third.data.loader.rank == 2);
  CHECK(third.data.loader.world_size == 4);
  CHECK(third.data.loader.pad_shards);  // equal shards: every rank makes the same number of steps
  CHECK(third.optim.schedule.base_lr == doctest::Approx(0.1 * 64 * 2 * 4 / 256));  // batch x accumulate x ranks
  CHECK(third.distributed.bucket_bytes == 25.0 * (1 << 20));
  CHECK(third.distributed.timeout_seconds == 300);

  // An explicit GPU index is kept; drop_last needs no padding.
  const TrainSettings pinned =
      from_config(Config::parse(kConfig, "dp.ini", {"train.device=cuda:0", "data.drop_last=true", "distributed.bucket_mb=4",
                                                    "distributed.timeout_s=20", "model.sync_bn=true"}),
                  rank_of(1, 2));
  CHECK(pinned.compute.device == Device::cuda(0));
  CHECK_FALSE(pinned.data.loader.pad_shards);
  CHECK(pinned.distributed.bucket_bytes == 4.0 * (1 << 20));
  CHECK(pinned.distributed.timeout_seconds == 20);
  CHECK(pinned.model.sync_bn);
}

TEST_CASE("settings: format = packed with a folder for its path is refused, naming the key and both ways out") {
  // Before: the folder was read as an ImageFolder, and its first empty subfolder was the error.
  const std::string folder = std::filesystem::temp_directory_path().string();
  const std::string expected = "[data] format = packed but '" + folder + "' is a folder; give the .h5 file that cnn_pack wrote";
  CHECK_THROWS_WITH_AS(from_config(Config::parse(kConfig, "dp.ini", {"data.format=packed", "data.path=" + folder})),
                       doctest::Contains(expected.c_str()), Error);
}

TEST_CASE("settings: [ema] and [swa] are read, and an EMA metric without the EMA or SWA after the last epoch is refused") {
  const TrainSettings s = from_config(Config::parse(
      kConfig, "avg.ini", {"ema.decay=0.9998", "ema.device=cpu", "ema.every_steps=4", "checkpoint.best_metric=ema_val_loss",
                           "train.epochs=10", "swa.start_epoch=8", "swa.lr=0.01", "swa.anneal=linear", "swa.anneal_epochs=2"}));
  CHECK(s.ema.on());
  CHECK(s.ema.decay == 0.9998);
  CHECK(s.ema.on_cpu);
  CHECK(s.ema.every_steps == 4);
  CHECK(s.ema.warmup);
  CHECK(s.checkpoint.best_of_ema);
  CHECK(s.checkpoint.best_is_loss);
  CHECK(s.swa.start_epoch == 8);
  CHECK(s.optim.schedule.swa_start == 7);  // 0-based in the schedule
  CHECK(s.optim.schedule.swa_lr == 0.01);
  CHECK(s.optim.schedule.swa_anneal_linear);
  CHECK(s.optim.schedule.swa_anneal_epochs == 2);
  CHECK_FALSE(from_config(Config::parse(kConfig, "plain.ini")).ema.on());
  CHECK_THROWS_WITH(from_config(Config::parse(kConfig, "avg.ini", {"checkpoint.best_metric=ema_val_top1"})),
                    doctest::Contains("best_metric = ema_val_top1 needs the EMA of the weights: set [ema] decay"));
  CHECK_THROWS_WITH(from_config(Config::parse(kConfig, "avg.ini", {"train.epochs=5", "swa.start_epoch=6"})),
                    doctest::Contains("[swa] start_epoch = 6 comes after the last epoch"));
}

TEST_CASE("format = packed opens the path as a packed file only: a folder is refused, not read as images") {
  const TrainSettings packed = from_config(Config::parse(kConfig, "p.ini", {"data.format=packed", "data.path=/data/train", "data.val_path=/data/val.h5"}));
  CHECK(packed.data.train_spec == "packed:/data/train");
  CHECK(packed.data.validation_spec == "packed:/data/val.h5");
  CHECK(from_config(Config::parse(kConfig, "p.ini", {"data.format=folder", "data.path=/data/train"})).data.train_spec == "/data/train");
}

TEST_CASE("settings: fp16 on the CPU is advised against with where it was set, bf16, fp32 and fp16 on CUDA are not") {
  const auto advice = [](const char* mode, const char* device) {
    return precision_advice(from_config(Config::parse(
        kConfig, "dp.ini", {std::string("precision.mode=") + mode, std::string("train.device=") + device})));
  };
  const std::string fp16_cpu = advice("fp16", "cpu");
  CHECK(fp16_cpu.find("precision.mode = fp16 on the CPU") != std::string::npos);
  CHECK(fp16_cpu.find("use mode = bf16") != std::string::npos);
  CHECK(fp16_cpu.rfind("--set", 0) == 0);  // where it was set: a command-line override here
  const std::string in_file = precision_advice(
      from_config(Config::parse(std::string(kConfig) + "[precision]\nmode = fp16\n", "run.ini", {"train.device=cpu"})));
  CHECK(in_file.rfind("run.ini:", 0) == 0);  // or the file and line
  CHECK(advice("bf16", "cpu").empty());
  CHECK(advice("fp32", "cpu").empty());
  CHECK(advice("fp16", "cuda").empty());
}

// The default used to be cuda, so a config without [train] device failed on a machine without a GPU.
TEST_CASE("settings: [train] device defaults to auto: cuda when a CUDA device is there, else cpu") {
  const std::string text = "[model]\nname = mlp\nnum_classes = 4\nin_channels = 1\n[data]\nformat = idx\npath = /x\n";
  const TrainSettings s = from_config(Config::parse(text, "auto.ini"));
  CHECK(s.compute.device_auto);
  CHECK(s.compute.device == (cuda::is_available() ? Device::cuda(0) : Device::cpu()));
  CHECK(from_config(Config::parse(text + "[train]\ndevice = cpu\n", "cpu.ini")).compute.device == Device::cpu());
  CHECK_FALSE(from_config(Config::parse(text + "[train]\ndevice = cpu\n", "cpu.ini")).compute.device_auto);
  CHECK(from_config(Config::parse(text + "[train]\ndevice = auto\n", "a.ini"), rank_of(1, 2)).compute.device ==
        (cuda::is_available() ? Device::cuda(1) : Device::cpu()));
}

namespace {
// The parameter names of the optimizer's head groups for `model` with [optim] `head` ("" : left out).
std::vector<std::string> head_parameters(const std::string& model, const std::string& head) {
  std::string text = "[model]\nname = " + model + "\nnum_classes = 5\nin_channels = 3\n[data]\nformat = idx\npath = /x\n"
                     "image_size = 32\n[train]\ndevice = cpu\n[optim]\nhead_lr_mult = 10\n";
  if (!head.empty()) text += "head = " + head + "\n";
  const TrainSettings settings = from_config(Config::parse(text, "head.ini"));
  std::ostringstream quiet;
  Console console(quiet, LogLevel::quiet, ProgressMode::lines, false);
  RunLog log(console, {});
  const Learner learner = build_learner(settings, 4, log);
  std::vector<std::string> names;
  for (const ParamGroup& g : learner.optimizer->groups())
    if (g.lr_mult == 10)
      for (const auto& [name, t] : g.params) names.push_back(name);
  return names;
}
}  // namespace

// The default head was 'fc' for every model: VGG's, EfficientNet's and the small nets' heads
// ('classifier') silently trained without head_lr_mult; an unknown name was ignored too.
TEST_CASE("settings: [optim] head follows the model by default, and a name that matches nothing is refused") {
  CHECK(head_parameters("resnet18", "") == std::vector<std::string>{"fc.weight", "fc.bias"});
  const std::vector<std::string> vgg = head_parameters("vgg11_bn", "");
  REQUIRE(!vgg.empty());
  for (const std::string& name : vgg) CHECK(name.starts_with("classifier."));
  CHECK(head_parameters("compact_cnn", "") == head_parameters("compact_cnn", "classifier"));
  const std::string message = error_message([] { head_parameters("efficientnet_b0", "nosuch"); });
  CHECK(message.find("head.ini:") != std::string::npos);
  CHECK(message.find("'nosuch' matches no parameter") != std::string::npos);
  CHECK(message.find("the model's head is 'classifier'") != std::string::npos);
}

// image_size 1024 with crop_pct 0.1 marked every validation image unreadable (each resized past the
// pixel limit) and advised cnn_pack --check; ratio_min above ratio_max was refused without file:line.
TEST_CASE("settings: a validation resize past the pixel limit and crossed crop ratios are refused at start with file:line") {
  const std::string text = "[model]\nname = mlp\nnum_classes = 4\nin_channels = 1\n[data]\nformat = idx\npath = /x\nval_path = /y\n"
                           "[train]\ndevice = cpu\n";
  const std::string huge =
      error_message([&] { from_config(Config::parse(text + "[data]\nimage_size = 1024\ncrop_pct = 0.1\n", "crop.ini")); });
  CHECK(huge.find("crop.ini:13: [data] image_size 1024 / crop_pct 0.1 resizes every evaluated image to a shorter side of 10240") !=
        std::string::npos);
  const std::string crossed =
      error_message([&] { from_config(Config::parse(text + "[augment]\nratio_min = 2\nratio_max = 0.5\n", "crop.ini")); });
  CHECK(crossed.find("crop.ini:12: [augment] ratio_min = 2 is above ratio_max = 0.5 (crop.ini:13)") != std::string::npos);
}

// resnet18 weights loaded into a resnet34 used to train with one log line ("96 missing from the file").
TEST_CASE("settings: pretrained weights load strictly outside the head, pretrained_strict = false loads what matches") {
  const io_test::ScratchDir dir("pretrained_strict");
  const std::string weights = (dir / "resnet18.safetensors").string();
  {
    std::unique_ptr<Module> source = make_model("resnet18", 1000, 3, 1);
    save_weights(*source, weights);
  }
  const auto learner_of = [&](const std::string& model, const std::string& extra) {
    const std::string text = "[model]\nname = " + model + "\nnum_classes = 5\nin_channels = 3\npretrained = " + weights + "\n" + extra +
                             "[data]\nformat = idx\npath = /x\nimage_size = 32\n[train]\ndevice = cpu\n";
    std::ostringstream quiet;
    Console console(quiet, LogLevel::quiet, ProgressMode::lines, false);
    RunLog log(console, {});
    return build_learner(from_config(Config::parse(text, "pre.ini")), 4, log);
  };
  // The same model with a fresh 5-class head: the head's 1000-class tensors are the exception.
  CHECK_NOTHROW(learner_of("resnet18", ""));
  const std::string message = error_message([&] { learner_of("resnet34", ""); });
  CHECK(message.find("pre.ini:5: [model] pretrained = " + weights + " does not fit resnet34 outside its head ('fc')") !=
        std::string::npos);
  CHECK(message.find("missing from the file: layer1.2.") != std::string::npos);
  CHECK(message.find("pretrained_strict = false") != std::string::npos);
  CHECK_NOTHROW(learner_of("resnet34", "pretrained_strict = false\n"));
}
