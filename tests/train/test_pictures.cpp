// Pictures of a run (train/pictures/): the bitmap font, tile grids, de-normalisation, the heat map's
// colours, captions of mixed targets, TensorBoard image and histogram events (read back by
// TensorBoard's own reader where the Python package is installed), and report.html built from a run
// folder's files, with the per-class scores computed from the confusion matrix.
#include <doctest/doctest.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>

#include "data/decode.h"
#include "data/encode.h"
#include "engine/test_io_support.h"
#include "train/log/tensorboard.h"
#include "train/pictures/bitmap_font.h"
#include "train/pictures/image_grid.h"
#include "train/pictures/report_html.h"
#include "train/pictures/run_pictures.h"
#include "train/config/config.h"
#include "train/small_run.h"

using namespace cnn;
using namespace cnn::train;

namespace {
int set_pixels(const data::Image& image) {
  int n = 0;
  for (const uint8_t v : image.pixels) n += v != 0;
  return n;
}
}  // namespace

TEST_CASE("pictures: the bitmap font draws its glyphs, capitals for lower case, '?' for the unknown") {
  data::Image a(9, 6, 1), b(9, 6, 1), unknown(9, 6, 1), question(9, 6, 1);
  draw_text(a, 0, 0, "1", {255, 0, 0, 0});
  CHECK(set_pixels(a) == 10);  // the '1': 1 + 2 + 1 + 1 + 1 + 1 + 3 pixels
  CHECK(a.at(0, 2, 0) == 255);
  CHECK(a.at(6, 1, 0) == 255);
  draw_text(b, 0, 0, "k", {255, 0, 0, 0});
  data::Image capital(9, 6, 1);
  draw_text(capital, 0, 0, "K", {255, 0, 0, 0});
  CHECK(b.pixels == capital.pixels);
  draw_text(unknown, 0, 0, "~", {255, 0, 0, 0});
  draw_text(question, 0, 0, "?", {255, 0, 0, 0});
  CHECK(unknown.pixels == question.pixels);
  CHECK(draw_text(a, 100, 100, "clipped", {1, 1, 1, 1}) == 100 + 7 * kCellWidth);  // off the image: nothing drawn
  CHECK(fit_text("ANKLE BOOT", 30) == "ANKLE");
  CHECK(text_width("ABC") == 18);
}

TEST_CASE("pictures: a grid enlarges tiles to the minimum side, grey as RGB, captions underneath") {
  std::vector<Tile> tiles;
  for (int k = 0; k < 3; ++k) {
    data::Image grey(28, 28, 1);
    grey.at(0, 0, 0) = static_cast<uint8_t>(100 + k);
    tiles.push_back({grey, "CLASS " + std::to_string(k)});
  }
  const data::Image grid = tile_grid(tiles, 2, 64);
  // Scale 3 (84 pixels), cells 84 wide and 84 + one caption line (9) + 2 high, 4 pixels apart.
  CHECK(grid.channels == 3);
  CHECK(grid.width == 4 + 2 * (84 + 4));
  CHECK(grid.height == 4 + 2 * (95 + 4));
  CHECK(grid.at(4, 4, 0) == 100);
  CHECK(grid.at(6, 6, 2) == 100);  // the same source pixel, enlarged, in every channel
  CHECK(grid.at(4, 4 + 88, 1) == 101);
  CHECK(grid.at(4 + 99, 4, 0) == 102);
}

TEST_CASE("pictures: de-normalisation gives back the 8-bit pixels, the heat map runs from purple to yellow") {
  const data::Normalize normalize{{0.5f}, {0.25f}};
  // pixel p -> (p / 255 - 0.5) / 0.25
  const Tensor batch = Tensor::from_vector<float>({(0.0f - 0.5f) / 0.25f, (1.0f - 0.5f) / 0.25f, (100.0f / 255 - 0.5f) / 0.25f,
                                                   (2.0f - 0.5f) / 0.25f},
                                                  {1, 2, 2, 1});
  const data::Image image = denormalize(batch, normalize, 1).front();
  CHECK(image.pixels == std::vector<uint8_t>{0, 255, 100, 255});  // the last one clamped
  CHECK(heat_colour(0) == std::array<uint8_t, 3>{68, 1, 84});
  CHECK(heat_colour(1) == std::array<uint8_t, 3>{253, 231, 37});
  CHECK(heat_colour(0.5) == std::array<uint8_t, 3>{33, 145, 140});
  const data::Image map = confusion_heatmap({5, 0, 0, 5}, 2);  // a perfect classifier: yellow diagonal
  const int margin = 3 * kCellWidth + 2, cell = 32;  // 480 / classes, at most 32
  CHECK(map.width == margin + 2 * cell);
  CHECK(map.at(margin + 10, margin + 10, 0) == 253);
  CHECK(map.at(margin + 10, margin + cell + 10, 0) == 68);
}

TEST_CASE("pictures: captions name the class, or the two classes of a mixed target with their weights") {
  const std::vector<std::string> names = {"cat", "dog", "bird"};
  CHECK(target_caption({0, 1, 0}, names) == "dog");
  CHECK(target_caption({0.05, 0.9, 0.05}, names) == "dog");  // label smoothing: still one class
  CHECK(target_caption({0.62, 0.0, 0.38}, names) == "cat 62%\nbird 38%");
}

TEST_CASE("pictures: TensorBoard image and histogram events, read back by TensorBoard") {
  const io_test::ScratchDir dir("tensorboard_pictures");
  data::Image image(12, 20, 3);
  for (size_t i = 0; i < image.pixels.size(); ++i) image.pixels[i] = static_cast<uint8_t>(i);
  const std::vector<uint8_t> png = data::encode_image(image, data::ImageFormat::png);
  {
    EventWriter writer(dir);
    writer.add_image("images/samples", png, 12, 20, 3, 7);
    std::vector<double> values;
    for (int i = 0; i < 1000; ++i) values.push_back(i * 0.001);
    writer.add_histogram("weights/fc.weight", values, 7, 30);
    writer.flush();
  }
  if (std::system("python3 -c 'import tensorboard' >/dev/null 2>&1") != 0) {
    MESSAGE("skipped the check with TensorBoard's event reader: the tensorboard Python package is not installed");
    return;
  }
  const auto script = dir / "read.py";
  std::ofstream(script) << "import sys, struct\n"
                           "from tensorboard.backend.event_processing.event_accumulator import EventAccumulator\n"
                           "acc = EventAccumulator(sys.argv[1], size_guidance={'images': 0, 'histograms': 0}); acc.Reload()\n"
                           "img = acc.Images('images/samples')[0]\n"
                           "s = img.encoded_image_string\n"
                           "assert s[:8] == b'\\x89PNG\\r\\n\\x1a\\n', s[:8]\n"
                           "assert struct.unpack('>II', s[16:24]) == (20, 12), struct.unpack('>II', s[16:24])\n"
                           "assert (img.width, img.height, img.step) == (20, 12, 7)\n"
                           "h = acc.Histograms('weights/fc.weight')[0].histogram_value\n"
                           "assert h.num == 1000 and sum(h.bucket) == 1000 and len(h.bucket) == 30, h\n"
                           "assert abs(h.min) < 1e-12 and abs(h.max - 0.999) < 1e-12 and h.bucket_limit[-1] >= h.max\n";
  CHECK(std::system(("python3 " + script.string() + " " + dir.string()).c_str()) == 0);
}

TEST_CASE("report.html: built from a run folder's files, per-class precision, recall and F1 from the matrix") {
  const io_test::ScratchDir dir("report");
  const std::filesystem::path run = dir / "20261203_120000_demo";
  std::filesystem::create_directories(run);
  std::ofstream(run / "config.ini") << "[model]\nname = compact_cnn <b>\n";
  std::ofstream(run / "classes.txt") << "cat\ndog\n";
  std::ofstream(run / "metrics.jsonl") << R"({"step":50,"epoch":1,"train_loss":1.5,"lr":0.1})" "\n"
                                       << R"({"step":100,"epoch":1,"train_loss":0.9,"val_loss":0.8,"val_top1":85.0,"val_top5":100,)"
                                          R"("images_per_second":1200,"data_wait":0.01,"epoch_seconds":40,"kind":"epoch"})" "\n"
                                       << R"({"step":150,"epoch":2,"train_lo)";  // a line cut short by a kill
  std::ofstream(run / "confusion.json") << nlohmann::json{{"epoch", 1}, {"confusion_matrix_rows_truth_columns_predicted", {{8, 2}, {1, 9}}}}.dump();
  const std::vector<uint8_t> png = data::encode_image(data::Image(4, 4, 3), data::ImageFormat::png);
  std::ofstream(run / "samples.png", std::ios::binary).write(reinterpret_cast<const char*>(png.data()), static_cast<std::streamsize>(png.size()));

  const RunRecord record = read_run(run);
  CHECK(record.name == "20261203_120000_demo");
  CHECK(record.steps.size() == 1);
  CHECK(record.epochs.size() == 1);
  CHECK(record.epochs[0].get("val_top1") == 85.0);
  CHECK(record.broken_metrics_lines == 1);
  const std::string html = report_html({record});
  CHECK(html.find("85.00% (epoch 1)") != std::string::npos);
  CHECK(html.find("1 line(s) of metrics.jsonl could not be read") != std::string::npos);
  for (const char* id : {"id=\"summary\"", "id=\"curves\"", "id=\"confusion\"", "id=\"per-class-table\"", "id=\"samples-image\"",
                         "id=\"mistakes\"", "id=\"config\""})
    CHECK_MESSAGE(html.find(id) != std::string::npos, id);
  // cat: precision 8/9, recall 8/10, F1 2PR/(P+R) = 16/19; dog: precision 9/11, recall 9/10.
  CHECK(html.find("<td>0 cat</td><td>88.9%</td><td>80.0%</td><td>84.2%</td><td>10</td>") != std::string::npos);
  CHECK(html.find("<td>1 dog</td><td>81.8%</td><td>90.0%</td><td>85.7%</td><td>10</td>") != std::string::npos);
  CHECK(html.find("compact_cnn &lt;b&gt;") != std::string::npos);  // the config is escaped
  CHECK(html.find("data:image/png;base64," + base64(std::string(png.begin(), png.end()))) != std::string::npos);
  CHECK(html.find("<script") == std::string::npos);  // nothing to run, nothing fetched
  CHECK(html.find("http") == html.find("http://www.w3.org/2000/svg"));
  CHECK(html.find("no mistakes yet") != std::string::npos);

  // Two runs: the comparison charts come first, a series per run.
  const std::string both = report_html({record, record});
  CHECK(both.find("id=\"compare\"") != std::string::npos);
  CHECK(both.find("id=\"compare\"") < both.find("id=\"summary\""));
}

TEST_CASE("report.html: base64 as RFC 4648 gives it, and a missing folder is refused by name") {
  CHECK(base64("") == "");
  CHECK(base64("f") == "Zg==");
  CHECK(base64("fo") == "Zm8=");
  CHECK(base64("foo") == "Zm9v");
  CHECK(base64("foobar") == "Zm9vYmFy");
  CHECK_THROWS_WITH_AS(read_run("/nonexistent/run"), doctest::Contains("'/nonexistent/run' is not a run folder"), Error);
  // A folder that is not a run's used to get a report.html written into it (and rc 0 from cnn_report).
  const io_test::ScratchDir other("not_a_run");
  CHECK_THROWS_WITH_AS(read_run(other), doctest::Contains("holds neither config.ini nor metrics.jsonl"), Error);
  CHECK_FALSE(std::filesystem::exists(other / "report.html"));
}

TEST_CASE("trainer: a run's folder holds its pictures, report.html and TensorBoard images and histograms") {
  cnn::train::testing::SmallRun run("pictures_run", 64, 16, 1, 2);  // batches of 32 28x28 grey images
  const TrainSummary s = run_training(Config::parse(run.text, "test.ini", {"log.histogram_every=1"}), run.opts);
  const auto size_of = [](const std::filesystem::path& png) {
    const std::string bytes = io_test::read_file(png);
    const data::Image image =
        data::decode_image(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), data::DecodeOptions{}, png.string());
    return std::to_string(image.width) + "x" + std::to_string(image.height);
  };
  CHECK(size_of(s.run_dir / "samples.png") == "708x400");  // 8 columns of 84-pixel tiles, 4 rows with captions
  CHECK(size_of(s.run_dir / "confusion.png") == "148x148");  // 4 classes of 32 pixels and a 20-pixel margin for the numbers
  CHECK(std::filesystem::exists(s.run_dir / "report.html"));
  std::filesystem::path events;
  for (const auto& entry : std::filesystem::directory_iterator(s.run_dir))
    if (entry.path().filename().string().rfind("events.out.tfevents.", 0) == 0) events = entry.path();
  const std::string bytes = io_test::read_file(events);
  for (const char* tag : {"images/samples", "images/confusion", "weights/features.0.weight", "gradients/features.0.weight"})
    CHECK_MESSAGE(bytes.find(tag) != std::string::npos, tag);
  // Two epochs: histograms after each.
  size_t histograms = 0;
  for (size_t at = bytes.find("weights/features.0.weight"); at != std::string::npos; at = bytes.find("weights/features.0.weight", at + 1))
    ++histograms;
  CHECK(histograms == 2);
}
