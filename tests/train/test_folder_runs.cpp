// Training runs on image folders. Class names that are bytes, not UTF-8 (a folder "caf\xe9" made on
// a Latin-1 machine): confusion.json, report.html and predictions in JSON write the stray bytes as
// \xHH, and such a name never costs the run its checkpoints. The class count taken from the folder
// when [model] num_classes is left out.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "train/checkpoint.h"
#include "train/config/config.h"
#include "train/infer.h"
#include "train/log/json_text.h"
#include "train/small_run.h"
#include "train/trainer.h"
#include "train/validation.h"
#include "error_message.h"

using namespace cnn;
using namespace cnn::train;
using namespace cnn::train::testing;
using cnn::testing::error_message;

namespace {
const std::string kLatin1Name = "caf\xe9";  // not UTF-8
}  // namespace

TEST_CASE("json_text: a document holding names that are not UTF-8 is written, the stray bytes spelled \\xHH") {
  nlohmann::json doc = {{"classes", {kLatin1Name, "b"}}, {kLatin1Name, 1.5}};
  CHECK_THROWS(doc.dump());  // what used to end the run (type_error 316)
  const nlohmann::json back = nlohmann::json::parse(json_text(doc, 1));
  CHECK(back["classes"][0] == "caf\\xE9");
  CHECK(back["caf\\xE9"] == 1.5);
  const nlohmann::ordered_json ordered = {{"path", "x/" + kLatin1Name + ".png"}};
  CHECK(nlohmann::ordered_json::parse(json_text(ordered))["path"] == "x/caf\\xE9.png");
  CHECK(json_text(nlohmann::json{{"a", "plain"}}) == R"({"a":"plain"})");  // valid text as dump() writes it
}

// Before, write_confusion threw nlohmann's type_error 316 at the first validation: the run ended
// without last.h5.
TEST_CASE("trainer: a class folder whose name is not UTF-8 trains, validates and keeps its checkpoints") {
  ScratchDir dir("latin1_class");
  write_image_folder(dir.path / "data", {"b", kLatin1Name}, 12);
  std::ostringstream quiet;
  TrainRunOptions opts;
  opts.console = &quiet;
  const std::string text = "[model]\nname = mlp\nnum_classes = 2\nin_channels = 1\n"
                           "[data]\nformat = folder\npath = " + (dir.path / "data").string() +
                           "\nval_path = " + (dir.path / "data").string() +
                           "\nbatch_size = 8\nimage_size = 28\ncrop_pct = 1.0\nmean = 0.2\nstd = 0.3\nworkers = 1\n"
                           "[augment]\nrandom_resized_crop = false\nhflip = 0\n[optim]\nhead = classifier\n"
                           "[train]\nepochs = 1\ndevice = cpu\nthreads = 1\n[log]\nlevel = quiet\n"
                           "[run]\ndir = " + (dir.path / "runs").string() + "\nname = latin1\n";
  const TrainSummary summary = run_training(Config::parse(text, "latin1.ini"), opts);
  CHECK(std::filesystem::exists(summary.run_dir / "last.h5"));
  CHECK(std::filesystem::exists(summary.run_dir / "best.h5"));
  const nlohmann::json confusion = nlohmann::json::parse(read_text_file(summary.run_dir / "confusion.json"));
  CHECK(confusion["classes"] == nlohmann::json({"b", "caf\\xE9"}));
  const std::string report = read_text_file(summary.run_dir / "report.html");
  CHECK(report.find("caf\\xE9") != std::string::npos);
  CHECK(report.find(kLatin1Name) == std::string::npos);

  // cnn_infer --format json over an image whose path holds the same bytes, with the checkpoint's names.
  InferOptions infer;
  infer.checkpoints = {summary.run_dir / "best.h5"};
  infer.topk = 2;
  infer.warn = [](const std::string&) {};
  const InferResult predictions = run_inference({(dir.path / "data" / kLatin1Name / "0.png").string()}, infer);
  std::ostringstream json;
  write_predictions(json, predictions, OutputFormat::json);
  const nlohmann::json parsed = nlohmann::json::parse(json.str());
  CHECK(parsed.dump().find("caf\\\\xE9") != std::string::npos);
}

namespace {
// A config of one epoch of the MLP on the image folder `data` (validated on it too), without
// [model] num_classes unless `classes` is given.
std::string folder_config(const ScratchDir& dir, const std::string& classes = "") {
  return "[model]\nname = mlp\nin_channels = 1\n" + (classes.empty() ? "" : "num_classes = " + classes + "\n") +
         "[data]\nformat = folder\npath = " + (dir.path / "data").string() + "\nval_path = " + (dir.path / "data").string() +
         "\nbatch_size = 8\nimage_size = 28\ncrop_pct = 1.0\nmean = 0.2\nstd = 0.3\nworkers = 1\n"
         "[augment]\nrandom_resized_crop = false\nhflip = 0\n[train]\nepochs = 1\ndevice = cpu\nthreads = 1\n"
         "[log]\nlevel = normal\nimages = false\n[run]\ndir = " + (dir.path / "runs").string() + "\n";
}
}  // namespace

// Leaving out num_classes trained a 1000-way head (the key's default) on a 3-class folder without a
// word; 2 classes were caught only by the labels, 5 were silent.
TEST_CASE("trainer: [model] num_classes left out takes the data's class count, fewer is refused, more warned") {
  ScratchDir dir("classes_from_data");
  write_image_folder(dir.path / "data", {"a", "b", "c"}, 8);
  std::ostringstream shown;
  TrainRunOptions opts;
  opts.console = &shown;
  const TrainSummary s = run_training(Config::parse(folder_config(dir), "classes.ini"), opts);
  CHECK(shown.str().find("[model] num_classes = 3, the classes of the training data") != std::string::npos);
  CHECK(read_text_file(s.run_dir / "config.ini").find("num_classes = 3") != std::string::npos);
  CHECK(load_checkpoint(s.run_dir / "last.h5").class_names == std::vector<std::string>{"a", "b", "c"});
  // The same INI resumes onto the same count (config.ini holds it, the INI still leaves it out).
  TrainRunOptions resume = opts;
  resume.resume = s.run_dir.string();
  CHECK(run_training(Config::parse(folder_config(dir), "classes.ini", {"train.epochs=2"}), resume).steps > 0);

  const std::string fewer = error_message([&] { run_training(Config::parse(folder_config(dir, "2"), "classes.ini"), opts); });
  CHECK(fewer.find("num_classes is 2") != std::string::npos);
  CHECK(fewer.find("classes.ini:") != std::string::npos);
  shown.str("");
  run_training(Config::parse(folder_config(dir, "5"), "classes.ini"), opts);
  CHECK(shown.str().find("[model] num_classes = 5 (classes.ini:") != std::string::npos);
  CHECK(shown.str().find("2 outputs of the head never see a training image") != std::string::npos);
}

// A validation folder holding the training set's classes a and c was scored as [a, b]: c's images
// counted as b, a right model reported at 50%. Classes are now matched by name.
TEST_CASE("trainer: validation classes are matched to the training classes by name, unknown ones are refused") {
  ScratchDir dir("validation_names");
  write_image_folder(dir.path / "data", {"a", "b", "c"}, 8);
  write_image_folder(dir.path / "val", {"a", "b", "c"}, 4);
  std::filesystem::remove_all(dir.path / "val" / "b");
  std::ostringstream shown;
  TrainRunOptions opts;
  opts.console = &shown;
  const std::string val = "data.val_path=" + (dir.path / "val").string();
  const TrainSummary s = run_training(Config::parse(folder_config(dir), "names.ini", {val}), opts);
  CHECK(shown.str().find("the validation data has no class b of the training data (1 of 3)") != std::string::npos);
  const nlohmann::json confusion = nlohmann::json::parse(read_text_file(s.run_dir / "confusion.json"));
  CHECK(confusion["classes"] == nlohmann::json({"a", "b", "c"}));
  const auto& rows = confusion["confusion_matrix_rows_truth_columns_predicted"];
  const auto images_of = [&](size_t truth) {
    int64_t n = 0;
    for (const auto& count : rows[truth]) n += count.get<int64_t>();
    return n;
  };
  CHECK(images_of(0) == 4);
  CHECK(images_of(1) == 0);  // b has no validation images
  CHECK(images_of(2) == 4);  // c's images are scored as c, not as the second class

  write_image_folder(dir.path / "val", {"d"}, 2);
  const std::string unknown = error_message([&] { run_training(Config::parse(folder_config(dir), "names.ini", {val}), opts); });
  CHECK(unknown.find("has 1 class that the training data") != std::string::npos);
  CHECK(unknown.find("lacks: d") != std::string::npos);
}
