// The run's record files with class names that are bytes, not UTF-8 (a folder "caf\xe9" made on a
// Latin-1 machine): confusion.json, report.html and predictions in JSON are written with the stray
// bytes spelled \xHH, and such a name never costs the run its checkpoints.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "data/encode.h"
#include "train/config/config.h"
#include "train/infer.h"
#include "train/log/json_text.h"
#include "train/small_run.h"
#include "train/trainer.h"
#include "train/validation.h"

using namespace cnn;
using namespace cnn::train;
using namespace cnn::train::testing;

namespace {
const std::string kLatin1Name = "caf\xe9";  // not UTF-8

// `per_class` 28x28 PNGs in <root>/<name>/ for each name; class k is a bright square in quadrant k.
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
