// The run folder (train/run_folder.h): resume = auto matches the run name exactly, a new run always
// gets a folder of its own, a run name is one folder name, and a refused resume leaves nothing.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>

#include "engine/error.h"
#include "train/config/config.h"
#include "train/run_folder.h"
#include "train/small_run.h"
#include "train/train_settings.h"
#include "error_message.h"

using namespace cnn;
using namespace cnn::train;
using cnn::testing::error_message;
using cnn::train::testing::ScratchDir;

namespace {
// <parent>/<folder>/last.h5 (an empty file: the folder search only asks whether it is there).
std::filesystem::path fake_run(const std::filesystem::path& parent, const std::string& folder) {
  std::filesystem::create_directories(parent / folder);
  std::ofstream(parent / folder / "last.h5") << "";
  return parent / folder;
}

RunSettings run_named(const std::filesystem::path& parent, const std::string& name, const std::string& resume = "") {
  RunSettings s;
  s.name = name;
  s.parent = parent.string();
  s.resume = resume;
  return s;
}
}  // namespace

// It used to match the suffix "_<name>": run "baseline" resumed (and overwrote) the newer folder of
// run "wide_baseline".
TEST_CASE("run folder: resume = auto takes the newest folder of exactly this run name") {
  ScratchDir dir("run_folder_auto");
  const auto runs = dir.path / "runs";
  const auto own = fake_run(runs, "20261130_080000_baseline");
  fake_run(runs, "20261201_080000_wide_baseline");
  fake_run(runs, "20261202_080000_baseline_wide");
  fake_run(runs, "notastamp_baseline");
  CHECK(open_run_folder(run_named(runs, "baseline", "auto"), "").dir == own);
  // Within one second: -10 is newer than -2, which is newer than the plain stamp.
  fake_run(runs, "20261203_080000_b");
  fake_run(runs, "20261203_080000-2_b");
  const auto tenth = fake_run(runs, "20261203_080000-10_b");
  const RunFolder b = open_run_folder(run_named(runs, "b", "auto"), "");
  CHECK(b.dir == tenth);
  CHECK(b.resume_from == tenth / "last.h5");
  CHECK_FALSE(b.created);
  // No folder of the name holds a last.h5: a new run.
  const RunFolder fresh = open_run_folder(run_named(runs, "other", "auto"), "");
  CHECK(fresh.created);
  CHECK(fresh.resume_from.empty());
}

// Two runs of one name started in the same second shared one folder; in one process the second
// was refused by the first one's lock.
TEST_CASE("run folder: runs of one name started in the same second each get a folder of their own") {
  ScratchDir dir("run_folder_collide");
  std::vector<RunFolder> held;
  for (int i = 0; i < 3; ++i) held.push_back(open_run_folder(run_named(dir.path / "runs", "same"), ""));
  CHECK(held[0].dir != held[1].dir);
  CHECK(held[1].dir != held[2].dir);
  CHECK(held[0].dir != held[2].dir);
  for (const RunFolder& f : held) {
    CHECK(f.created);
    CHECK(f.dir.filename().string().ends_with("_same"));
  }
}

TEST_CASE("run folder: a run name is one folder name") {
  const std::string base = "[model]\nname = mlp\nnum_classes = 4\nin_channels = 1\n[data]\nformat = idx\npath = /x\n[train]\ndevice = cpu\n";
  for (const std::string name : {"../../../escaped", "a/b", "..", "."}) {
    CAPTURE(name);
    const std::string message = error_message([&] { from_config(Config::parse(base + "[run]\nname = " + name + "\n", "n.ini")); });
    CHECK(message.find("n.ini:") != std::string::npos);
    CHECK(message.find("is not one folder name") != std::string::npos);
  }
  CHECK(from_config(Config::parse(base + "[run]\nname = wide.resnet-2\n", "n.ini")).run.name == "wide.resnet-2");
}

// A --resume of a folder without last.h5 (a dataset folder, say) locked it first and left a .lock
// there; a missing folder was made, locked and left behind.
TEST_CASE("run folder: a refused resume makes and locks nothing") {
  ScratchDir dir("run_folder_refused");
  const auto data = dir.path / "dataset";
  std::filesystem::create_directories(data / "cat");
  CHECK(error_message([&] { open_run_folder(run_named(dir.path / "runs", "r"), data.string()); }).find("does not exist") !=
        std::string::npos);
  CHECK_FALSE(std::filesystem::exists(data / ".lock"));
  const auto missing = dir.path / "no_such_run";
  CHECK_THROWS_AS(open_run_folder(run_named(dir.path / "runs", "r"), missing.string()), Error);
  CHECK_FALSE(std::filesystem::exists(missing));
  CHECK_FALSE(std::filesystem::exists(dir.path / "runs"));
}

// Resuming a copy made with cp -as wrote through the links: the original's config.ini rewritten,
// its train.log appended to.
TEST_CASE("run folder: resuming a folder whose files are links is refused, naming the link") {
  ScratchDir dir("run_folder_links");
  const auto original = fake_run(dir.path / "runs", "20261201_080000_r");
  std::ofstream(original / "train.log") << "original\n";
  const auto clone = dir.path / "clone";
  std::filesystem::create_directories(clone);
  std::filesystem::copy_file(original / "last.h5", clone / "last.h5");
  std::filesystem::create_symlink(original / "train.log", clone / "train.log");
  const std::string message = error_message([&] { open_run_folder(run_named(dir.path / "runs", "r"), clone.string()); });
  CHECK(message.find("train.log is a symbolic link") != std::string::npos);
  CHECK(message.find("cp -a") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(clone / ".lock"));
}
