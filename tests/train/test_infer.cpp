// Inference (train/infer.h) on a small checkpoint of compact_cnn and a few PNG files: probabilities
// that sum to 1 and match the model run by hand, sorted top-k with the checkpoint's class names,
// flip and multi-scale test-time augmentation equal to the averages they stand for, an ensemble of
// one checkpoint twice equal to the checkpoint, a weights file with the preprocessing given by hand,
// corrupt files skipped and counted, and csv/json output that parses back.
#include <doctest/doctest.h>

#include <cmath>
#include <iomanip>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "data/encode.h"
#include "engine/cnn.h"
#include "engine/test_io_support.h"
#include "layers/registry.h"
#include "layers/weights.h"
#include "train/checkpoint.h"
#include "train/config/config.h"
#include "train/eval_support.h"
#include "train/infer.h"

using namespace cnn;
using namespace cnn::train;

namespace {
const std::vector<std::string> kClasses = {"boot", "coat", "dress", "shirt"};

// A checkpoint of an initialised compact_cnn (4 classes, 28x28 gray, no resize at crop_pct 1) and
// the same weights as a plain .h5 weights file.
struct Fixture {
  io_test::ScratchDir dir;
  std::filesystem::path checkpoint, weights, names;
  std::unique_ptr<Module> model;

  explicit Fixture(const std::string& name) : dir("infer_" + name) {
    const Config c = Config::parse(
        "[model]\nname = compact_cnn\nnum_classes = 4\nin_channels = 1\n"
        "[data]\nimage_size = 28\ncrop_pct = 1.0\nmean = 0.5\nstd = 0.5\n",
        "infer.ini");
    model = make_model("compact_cnn", 4, 1, 11);
    model->eval();
    TrainingState s;
    s.params = as_named(model->named_parameters());
    s.buffers = as_named(model->named_buffers());
    s.config = c.to_ini();
    s.class_names = kClasses;
    checkpoint = dir / "best.h5";
    save_checkpoint(checkpoint, s);
    weights = dir / "weights.h5";
    save_weights(*model, weights);
    names = dir / "classes.txt";
    std::ofstream(names) << "boot\ncoat\ndress\nshirt\n";
    std::filesystem::create_directories(dir / "images" / "more");
  }

  // A gray image with a bright block left of centre over seeded noise: not mirror-symmetric.
  static data::Image picture(int h, int w, uint32_t seed) {
    data::Image img(h, w, 1);
    uint32_t state = seed;
    for (int y = 0; y < h; ++y)
      for (int x = 0; x < w; ++x) {
        state = state * 1664525u + 1013904223u;
        const bool block = x >= w / 8 && x < w / 2 && y >= h / 4 && y < h * 3 / 4;
        img.at(y, x, 0) = static_cast<uint8_t>(block ? 230 : (state >> 27) + 3 * y);
      }
    return img;
  }

  static data::Image mirrored(const data::Image& img) {
    data::Image out(img.height, img.width, img.channels);
    for (int y = 0; y < img.height; ++y)
      for (int x = 0; x < img.width; ++x) out.at(y, x, 0) = img.at(y, img.width - 1 - x, 0);
    return out;
  }

  std::string write_png(const std::string& name, const data::Image& img) const {
    const std::vector<uint8_t> bytes = data::encode_image(img, data::ImageFormat::png);
    std::ofstream(dir / name, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()),
                                                      static_cast<std::streamsize>(bytes.size()));
    return (dir / name).string();
  }

  InferOptions options() const {
    InferOptions o;
    o.checkpoints = {checkpoint};
    o.topk = 3;
    o.batch_size = 2;
    o.warn = [](const std::string&) {};
    return o;
  }
};

std::vector<double> probabilities_of(const std::string& path, const InferOptions& options) {
  const InferResult r = run_inference({path}, options);
  REQUIRE(r.predictions.size() == 1);
  return r.predictions[0].probabilities;
}

double max_difference(const std::vector<double>& a, const std::vector<double>& b) {
  REQUIRE(a.size() == b.size());
  double d = 0;
  for (size_t i = 0; i < a.size(); ++i) d = std::max(d, std::abs(a[i] - b[i]));
  return d;
}

std::vector<double> average(const std::vector<double>& a, const std::vector<double>& b) {
  std::vector<double> m(a.size());
  for (size_t i = 0; i < a.size(); ++i) m[i] = (a[i] + b[i]) / 2;
  return m;
}
}  // namespace

TEST_CASE("infer: probabilities match the model run by hand, top-k is sorted, corrupt files are skipped and counted") {
  Fixture f("basic");
  const data::Image first = Fixture::picture(28, 28, 1);
  f.write_png("images/a.png", first);
  f.write_png("images/more/b.png", Fixture::picture(28, 28, 2));
  f.write_png("images/c.png", Fixture::picture(40, 33, 3));
  std::ofstream(f.dir / "images" / "broken.png") << "not a png at all";
  std::ofstream(f.dir / "images" / "notes.txt") << "not an image, not picked up";

  std::vector<std::string> warnings;
  InferOptions o = f.options();
  o.warn = [&](const std::string& m) { warnings.push_back(m); };
  const std::vector<std::string> images = collect_images({(f.dir / "images").string()});
  REQUIRE(images.size() == 4);  // a, broken, c, more/b (sorted by path); notes.txt left out
  CHECK(images[1].ends_with("broken.png"));
  CHECK(images[3].ends_with("more/b.png"));
  const InferResult r = run_inference(images, o);
  CHECK(r.unreadable == 1);
  REQUIRE(warnings.size() == 1);
  CHECK(warnings[0].find("broken.png") != std::string::npos);
  CHECK(r.class_names == kClasses);
  REQUIRE(r.predictions.size() == 3);
  CHECK(r.predictions[0].path == images[0]);
  CHECK(r.predictions[1].path == images[2]);
  CHECK(r.predictions[2].path == images[3]);
  for (const Prediction& p : r.predictions) {
    REQUIRE(p.probabilities.size() == 4);
    double sum = 0;
    for (double v : p.probabilities) sum += v;
    CHECK(sum == doctest::Approx(1.0).epsilon(1e-6));
    REQUIRE(p.top.size() == 3);
    const double best = *std::max_element(p.probabilities.begin(), p.probabilities.end());
    CHECK(p.probabilities[static_cast<size_t>(p.top[0])] == best);
    for (size_t k = 1; k < p.top.size(); ++k)
      CHECK(p.probabilities[static_cast<size_t>(p.top[k - 1])] >= p.probabilities[static_cast<size_t>(p.top[k])]);
  }

  // The first image by hand: 28x28 needs no resize or crop; normalise with mean 0.5, std 0.5.
  std::vector<float> pixels;
  for (uint8_t v : first.pixels) pixels.push_back((v / 255.0f - 0.5f) / 0.5f);
  NoGrad no_grad;
  const std::vector<double> expected =
      softmax(f.model->forward(Tensor::from_vector(pixels, {1, 28, 28, 1}))).to_doubles();
  CHECK(max_difference(r.predictions[0].probabilities, expected) < 1e-6);

  // Nothing readable at all: no predictions, every file counted.
  const InferResult none = run_inference({(f.dir / "images" / "broken.png").string(), (f.dir / "missing.png").string()}, o);
  CHECK(none.predictions.empty());
  CHECK(none.unreadable == 2);
}

TEST_CASE("infer: a large photo is predicted with the rest of its batch") {
  // 900x900 to 28x28 was beyond the resampling filter's 30x limit: the file was named and skipped
  // (and before that it failed its whole batch). Now it is box-reduced first and predicted.
  Fixture f("large_photo");
  const std::string good = f.write_png("good.png", Fixture::picture(28, 28, 1));
  const std::string big = f.write_png("big.png", Fixture::picture(900, 900, 2));
  std::vector<std::string> warnings;
  InferOptions o = f.options();
  o.warn = [&](const std::string& m) { warnings.push_back(m); };
  const InferResult r = run_inference({good, big}, o);
  CHECK(r.unreadable == 0);
  REQUIRE(r.predictions.size() == 2);
  CHECK(r.predictions[0].path == good);
  CHECK(r.predictions[1].path == big);
  CHECK(warnings.empty());
}

TEST_CASE("infer: a file that fails after decoding is named and skipped, the rest of its batch predicted") {
  // A 1 x 3,300,000 strip decodes, but resizing its shorter side to 28 would give 92,400,000 pixels:
  // the transforms refuse it (a corrupt sample), after the decoder accepted it.
  Fixture f("strip");
  const std::string good = f.write_png("good.png", Fixture::picture(28, 28, 1));
  const std::string strip = f.write_png("strip.png", data::Image(1, 3300000, 1));
  std::vector<std::string> warnings;
  InferOptions o = f.options();
  o.warn = [&](const std::string& m) { warnings.push_back(m); };
  const InferResult r = run_inference({strip, good}, o);
  CHECK(r.unreadable == 1);
  REQUIRE(r.predictions.size() == 1);
  CHECK(r.predictions[0].path == good);
  REQUIRE(warnings.size() == 1);
  CHECK(warnings[0].find("strip.png") != std::string::npos);
  CHECK(warnings[0].find("gives 28 x 92400000 pixels") != std::string::npos);
}

TEST_CASE("infer: flip TTA is the average of the image and its mirror, multiscale averages the two resizes") {
  Fixture f("tta");
  const std::string plain = f.write_png("plain.png", Fixture::picture(28, 28, 5));
  const std::string mirror = f.write_png("mirror.png", Fixture::mirrored(Fixture::picture(28, 28, 5)));
  const InferOptions o = f.options();
  const std::vector<double> p = probabilities_of(plain, o), m = probabilities_of(mirror, o);
  CHECK(max_difference(p, m) > 1e-7);  // the mirror is another input, or the check below proves nothing
  InferOptions flip = o;
  flip.tta_flip = true;
  CHECK(max_difference(probabilities_of(plain, flip), average(p, m)) < 1e-6);

  // Multiscale at image size 28 and crop_pct 1: resizes to 28 and floor(1.15 * 28) = 32. The same
  // weights as a weights file with crop_pct 0.875 resize to floor(28 / 0.875) = 32 too.
  InferOptions big = o;
  big.checkpoints.clear();
  big.weights_models.push_back({f.weights, "compact_cnn", 0, 1, 28, 0.875, f.names});
  const std::vector<double> at32 = probabilities_of(plain, big);
  CHECK(max_difference(p, at32) > 1e-7);
  InferOptions multi = o;
  multi.tta_multiscale = true;
  CHECK(max_difference(probabilities_of(plain, multi), average(p, at32)) < 1e-6);
  CHECK(run_inference({plain}, big).class_names == kClasses);  // from the class names file
}

TEST_CASE("infer: a weights file takes its normalisation from mean and std") {
  Fixture f("normalisation");
  const std::string image = f.write_png("plain.png", Fixture::picture(28, 28, 5));
  const std::vector<double> from_checkpoint = probabilities_of(image, f.options());  // mean 0.5, std 0.5
  InferOptions o = f.options();
  o.checkpoints.clear();
  o.weights_models.push_back({f.weights, "compact_cnn", 4, 1, 28, 1.0, {}, {0.5}, {0.5}});
  CHECK(probabilities_of(image, o) == from_checkpoint);
  o.weights_models[0].mean = {0.2};
  o.weights_models[0].std = {0.3};
  CHECK(max_difference(probabilities_of(image, o), from_checkpoint) > 1e-6);
  o.weights_models[0].mean = {0.2, 0.3};  // two values for one channel
  CHECK_THROWS_WITH_AS(run_inference({image}, o), doctest::Contains("mean"), Error);
}

TEST_CASE("infer: an ensemble of one checkpoint twice equals the checkpoint, members of other classes are refused") {
  Fixture f("ensemble");
  const std::string a = f.write_png("a.png", Fixture::picture(28, 28, 7));
  const std::string b = f.write_png("b.png", Fixture::picture(30, 30, 8));
  const InferOptions single = f.options();
  InferOptions twice = single;
  twice.checkpoints = {f.checkpoint, f.checkpoint};
  const InferResult one = run_inference({a, b}, single), two = run_inference({a, b}, twice);
  REQUIRE(two.predictions.size() == 2);
  for (size_t i = 0; i < 2; ++i) {
    CHECK(max_difference(one.predictions[i].probabilities, two.predictions[i].probabilities) < 1e-12);
    CHECK(one.predictions[i].top == two.predictions[i].top);
  }

  const std::filesystem::path other = f.dir / "other.h5";
  save_weights(*make_model("compact_cnn", 5, 1, 1), other);
  InferOptions mixed = single;
  mixed.weights_models.push_back({other, "compact_cnn", 5, 1, 28, 1.0, {}});
  CHECK_THROWS_WITH_AS(run_inference({a}, mixed), doctest::Contains("disagree on the number of classes"), Error);
  InferOptions wrong_model = single;
  wrong_model.checkpoints.clear();
  wrong_model.weights_models.push_back({other, "compact_cnn", 4, 1, 28, 1.0, {}});
  CHECK_THROWS_AS(run_inference({a}, wrong_model), Error);
  std::filesystem::create_directories(f.dir / "empty");
  CHECK_THROWS_WITH_AS(collect_images({(f.dir / "empty").string()}), doctest::Contains("holds no image files"), Error);
  // A folder with a link back up (followed, the walk would not end) and a link that loops: the
  // first is left out with a warning, the second is an image file that will not load.
  std::filesystem::create_directories(f.dir / "looped");
  const std::string only = f.write_png("looped/a.png", Fixture::picture(28, 28, 1));
  std::filesystem::create_directory_symlink("..", f.dir / "looped/up");
  std::filesystem::create_symlink("b.png", f.dir / "looped/b.png");
  std::vector<std::string> warnings;
  const std::vector<std::string> found = collect_images({(f.dir / "looped").string()}, [&](const std::string& m) { warnings.push_back(m); });
  CHECK(found == std::vector<std::string>{only, (f.dir / "looped/b.png").string()});
  REQUIRE(warnings.size() == 1);
  CHECK(warnings[0].find("not following " + (f.dir / "looped/up").string()) == 0);
  InferOptions o = f.options();
  o.warn = [](const std::string&) {};
  CHECK(run_inference(found, o).unreadable == 1);
}

TEST_CASE("infer: csv and json output parse back to the predictions") {
  Fixture f("formats");
  const std::string a = f.write_png("a,1.png", Fixture::picture(28, 28, 9));  // a comma: csv must quote it
  const std::string b = f.write_png("b.png", Fixture::picture(28, 28, 10));
  const InferResult r = run_inference({a, b}, f.options());
  REQUIRE(r.predictions.size() == 2);

  std::ostringstream csv;
  write_predictions(csv, r, OutputFormat::csv);
  std::istringstream lines(csv.str());
  std::string line;
  REQUIRE(std::getline(lines, line));
  CHECK(line == "path,rank,class,probability");
  int rows = 0;
  while (std::getline(lines, line)) {
    const Prediction& p = r.predictions[static_cast<size_t>(rows / 3)];
    const int rank = rows % 3;
    // The path is the only field that may be quoted: split the other three off the end.
    const size_t c3 = line.rfind(','), c2 = line.rfind(',', c3 - 1), c1 = line.rfind(',', c2 - 1);
    const std::string path = line.substr(0, c1);
    CHECK(path == (rows < 3 ? "\"" + a + "\"" : b));
    CHECK(std::stoi(line.substr(c1 + 1, c2 - c1 - 1)) == rank + 1);
    CHECK(line.substr(c2 + 1, c3 - c2 - 1) == kClasses[static_cast<size_t>(p.top[static_cast<size_t>(rank)])]);
    CHECK(std::stod(line.substr(c3 + 1)) ==
          doctest::Approx(p.probabilities[static_cast<size_t>(p.top[static_cast<size_t>(rank)])]).epsilon(1e-6));
    ++rows;
  }
  CHECK(rows == 6);

  std::ostringstream json;
  write_predictions(json, r, OutputFormat::json);
  const nlohmann::json doc = nlohmann::json::parse(json.str());
  REQUIRE(doc.is_array());
  REQUIRE(doc.size() == 2);
  CHECK(doc[0]["path"] == a);
  REQUIRE(doc[1]["predictions"].size() == 3);
  for (size_t k = 0; k < 3; ++k) {
    const nlohmann::json& e = doc[1]["predictions"][k];
    const int64_t index = r.predictions[1].top[k];
    CHECK(e["rank"] == k + 1);
    CHECK(e["index"] == index);
    CHECK(e["class"] == kClasses[static_cast<size_t>(index)]);
    CHECK(e["probability"].get<double>() == r.predictions[1].probabilities[static_cast<size_t>(index)]);
  }

  std::ostringstream text;
  write_predictions(text, r, OutputFormat::text);
  std::istringstream text_lines(text.str());
  REQUIRE(std::getline(text_lines, line));
  CHECK(line == a);
  REQUIRE(std::getline(text_lines, line));
  std::ostringstream expected;
  expected << "  " << std::fixed << std::setprecision(4)
           << r.predictions[0].probabilities[static_cast<size_t>(r.predictions[0].top[0])] << "  "
           << kClasses[static_cast<size_t>(r.predictions[0].top[0])];
  CHECK(line == expected.str());
  CHECK_THROWS_WITH_AS(parse_output_format("xml"), doctest::Contains("use text, csv or json"), Error);
}

TEST_CASE("normalisation from a config: per channel, one value for all, single-channel defaults") {
  const data::Normalize rgb = normalize_of(Config::parse("[data]\nmean = 0.4, 0.5, 0.6\nstd = 0.2\n", "n.ini"), 3);
  CHECK(rgb.mean == std::vector<float>{0.4f, 0.5f, 0.6f});
  CHECK(rgb.std == std::vector<float>{0.2f, 0.2f, 0.2f});
  const data::Normalize gray = normalize_of(Config(), 1);  // ImageNet's defaults shrink to their first value
  CHECK(gray.mean == std::vector<float>{0.485f});
  CHECK_THROWS_WITH_AS(normalize_of(Config::parse("[data]\nmean = 0.4, 0.5\n", "n.ini"), 3),
                       doctest::Contains("n.ini:2: data.mean and data.std need 3 values"), Error);
}
