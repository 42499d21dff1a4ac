// Run logging (train/log): CRC-32C against published test vectors, the exact protobuf bytes of a
// scalar event, TensorBoard event files parsed back record by record (framing and checksums
// verified), TensorBoard's own reader when the Python package is installed, metrics.jsonl, and
// console levels with the progress bar and progress lines.
#include <doctest/doctest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "engine/error.h"
#include "engine/test_io_support.h"
#include "train/log/console.h"
#include "train/log/metrics_jsonl.h"
#include "train/log/tensorboard.h"
#include "train/run_log.h"
#include "train/train_settings.h"

using namespace cnn;
using namespace cnn::train;

namespace {
template <class T>
T fixed_at(const std::string& bytes, size_t pos) {
  T v;
  std::memcpy(&v, bytes.data() + pos, sizeof v);
  return v;
}

// The records of a TFRecord file, each checked against its two masked CRC-32Cs.
std::vector<std::string> read_records(const std::string& file) {
  std::vector<std::string> records;
  size_t pos = 0;
  while (pos < file.size()) {
    REQUIRE(pos + 12 <= file.size());
    const uint64_t length = fixed_at<uint64_t>(file, pos);
    CHECK(fixed_at<uint32_t>(file, pos + 8) == masked_crc32c(file.data() + pos, 8));
    REQUIRE(pos + 12 + length + 4 <= file.size());
    const std::string data = file.substr(pos + 12, length);
    CHECK(fixed_at<uint32_t>(file, pos + 12 + length) == masked_crc32c(data.data(), data.size()));
    records.push_back(data);
    pos += 12 + length + 4;
  }
  return records;
}

// A decoded Event with the fields the writer uses.
struct Event {
  double wall_time = 0;
  int64_t step = 0;
  std::string file_version, tag;
  float value = 0;
};

uint64_t varint(const std::string& b, size_t& pos) {
  uint64_t v = 0;
  for (int shift = 0;; shift += 7) {
    const auto byte = static_cast<unsigned char>(b.at(pos++));
    v |= static_cast<uint64_t>(byte & 0x7f) << shift;
    if (!(byte & 0x80)) return v;
  }
}

// Decodes a protobuf message, calling field(number, wire_type, pos) to consume each value.
template <class Field>
void decode(const std::string& b, Field field) {
  size_t pos = 0;
  while (pos < b.size()) {
    const uint64_t key = varint(b, pos);
    field(static_cast<int>(key >> 3), static_cast<int>(key & 7), pos);
  }
}

std::string length_delimited(const std::string& b, size_t& pos) {
  const uint64_t n = varint(b, pos);
  const std::string s = b.substr(pos, n);
  pos += n;
  return s;
}

Event parse_event(const std::string& data) {
  Event e;
  decode(data, [&](int number, int wire, size_t& pos) {
    if (number == 1 && wire == 1) {
      e.wall_time = fixed_at<double>(data, pos);
      pos += 8;
    } else if (number == 2 && wire == 0) {
      e.step = static_cast<int64_t>(varint(data, pos));
    } else if (number == 3 && wire == 2) {
      e.file_version = length_delimited(data, pos);
    } else if (number == 5 && wire == 2) {
      const std::string summary = length_delimited(data, pos);
      decode(summary, [&](int, int, size_t& spos) {
        const std::string value = length_delimited(summary, spos);
        decode(value, [&](int vnumber, int, size_t& vpos) {
          if (vnumber == 1) {
            e.tag = length_delimited(value, vpos);
          } else {
            e.value = fixed_at<float>(value, vpos);
            vpos += 4;
          }
        });
      });
    } else {
      FAIL("unexpected field " << number << " wire type " << wire);
    }
  });
  return e;
}
}  // namespace

TEST_CASE("TFRecord checksums are CRC-32C masked as TensorFlow does") {
  CHECK(masked_crc32c("", 0) == 0xa282ead8u);  // crc32c of nothing is 0
  // crc32c("123456789") = 0xE3069283, rotated right by 15 bits, plus the offset.
  CHECK(masked_crc32c("123456789", 9) == ((0xE3069283u >> 15) | (0xE3069283u << 17)) + 0xa282ead8u);
}

TEST_CASE("a scalar event has the protobuf bytes of tensorflow.Event") {
  const std::string e = event_encoding::scalar_event(1.5, 3, "loss", 0.25f);
  const unsigned char expected[] = {0x09, 0, 0, 0, 0, 0, 0, 0xF8, 0x3F,  // wall_time 1.5
                                    0x10, 0x03,                          // step 3
                                    0x2A, 0x0D,                          // summary, 13 bytes
                                    0x0A, 0x0B,                          //   value, 11 bytes
                                    0x0A, 0x04, 'l', 'o', 's', 's',      //     tag "loss"
                                    0x15, 0, 0, 0x80, 0x3E};             //     simple_value 0.25
  CHECK(e == std::string(reinterpret_cast<const char*>(expected), sizeof expected));
  const std::string r = event_encoding::tfrecord("abc");
  CHECK(r.size() == 8 + 4 + 3 + 4);
  CHECK(fixed_at<uint64_t>(r, 0) == 3);
  CHECK(r.substr(12, 3) == "abc");
}

TEST_CASE("TensorBoard event files parse back: file version first, then the scalars, checksums intact") {
  const io_test::ScratchDir dir("tensorboard");
  std::filesystem::path path;
  {
    EventWriter writer(dir);
    writer.add_scalar("train/loss", 2.5, 10, 1000.0);
    writer.add_scalar("train/lr", 0.1, 10, 1000.5);
    writer.add_scalar("val/top1", 0.75, 200);
    writer.flush();
    path = writer.path();
  }
  CHECK(path.filename().string().rfind("events.out.tfevents.", 0) == 0);
  const std::vector<std::string> records = read_records(io_test::read_file(path));
  REQUIRE(records.size() == 4);
  const Event version = parse_event(records[0]);
  CHECK(version.file_version == "brain.Event:2");
  CHECK(version.wall_time > 1.6e9);
  const Event loss = parse_event(records[1]);
  CHECK(loss.tag == "train/loss");
  CHECK(loss.value == 2.5f);
  CHECK(loss.step == 10);
  CHECK(loss.wall_time == 1000.0);
  CHECK(parse_event(records[2]).value == 0.1f);
  const Event top1 = parse_event(records[3]);
  CHECK(top1.tag == "val/top1");
  CHECK(top1.step == 200);
  CHECK(top1.wall_time >= version.wall_time);

  // TensorBoard's own reader, where the tensorboard Python package is installed.
  if (std::system("python3 -c 'import tensorboard' >/dev/null 2>&1") != 0) {
    MESSAGE("skipped the check with TensorBoard's event reader: the tensorboard Python package is not installed");
  } else {
    const auto script = dir / "read.py";
    std::ofstream(script) << "import sys\n"
                             "from tensorboard.backend.event_processing.event_accumulator import EventAccumulator\n"
                             "acc = EventAccumulator(sys.argv[1]); acc.Reload()\n"
                             "s = acc.Scalars('train/loss')\n"
                             "assert len(s) == 1 and s[0].step == 10 and s[0].value == 2.5, s\n"
                             "assert acc.Scalars('val/top1')[0].step == 200\n";
    CHECK(std::system(("python3 " + script.string() + " " + dir.string()).c_str()) == 0);
  }
}

TEST_CASE("metrics.jsonl: one JSON object per line, appended, non-finite numbers as null") {
  const io_test::ScratchDir dir("jsonl");
  const auto path = dir / "run" / "metrics.jsonl";
  {
    MetricsJsonl metrics(path);
    metrics.write(100, 1, {{"train/loss", 1.25}, {"train/lr", 0.1}});
  }
  {
    MetricsJsonl again(path);  // a resumed run appends
    again.write(200, 2, {{"val/top1", 0.5}, {"train/loss", std::numeric_limits<double>::infinity()}}, {{"note", "resumed"}});
  }
  std::istringstream lines(io_test::read_file(path));
  std::string line;
  std::vector<nlohmann::json> rows;
  while (std::getline(lines, line)) rows.push_back(nlohmann::json::parse(line));
  REQUIRE(rows.size() == 2);
  CHECK(rows[0]["step"] == 100);
  CHECK(rows[0]["epoch"] == 1);
  CHECK(rows[0]["train/loss"] == 1.25);
  CHECK(rows[0]["wall_time"].get<double>() > 1.6e9);
  CHECK(rows[1]["val/top1"] == 0.5);
  CHECK(rows[1]["train/loss"].is_null());
  CHECK(rows[1]["note"] == "resumed");
}

// A run killed while writing a line left it without its newline, and the resumed run's first line
// was glued onto it: both were lost to the readers.
TEST_CASE("metrics.jsonl: appending after a line cut short starts on a line of its own") {
  const io_test::ScratchDir dir("jsonl_cut");
  const auto path = dir / "metrics.jsonl";
  std::ofstream(path) << R"({"step":1,"epoch":1})" "\n" R"({"step":2,"ep)";
  {
    MetricsJsonl resumed(path);
    resumed.write(3, 1, {{"train_loss", 0.5}});
  }
  std::istringstream lines(io_test::read_file(path));
  std::vector<std::string> all;
  for (std::string line; std::getline(lines, line);) all.push_back(line);
  REQUIRE(all.size() == 3);
  CHECK(all[1] == R"({"step":2,"ep)");
  CHECK(nlohmann::json::parse(all[2])["step"] == 3);
}

// metrics.jsonl counted epochs from 0 while the console, confusion.json and the report count from 1.
TEST_CASE("run metrics: metrics.jsonl records the epoch 1-based, as the console shows it") {
  const io_test::ScratchDir dir("jsonl_epochs");
  LogSettings settings;
  settings.jsonl = true;
  settings.tensorboard = false;
  {
    RunMetrics metrics(settings, dir);
    metrics.write_step(10, 0, {{"train_loss", 1.0}});
    metrics.write_epoch(20, 0, {{"train_loss", 0.9}});
  }
  std::istringstream lines(io_test::read_file(dir / "metrics.jsonl"));
  std::string step, epoch;
  std::getline(lines, step);
  std::getline(lines, epoch);
  CHECK(nlohmann::json::parse(step)["epoch"] == 1);
  CHECK(nlohmann::json::parse(epoch)["epoch"] == 1);
  CHECK(nlohmann::json::parse(epoch)["kind"] == "epoch");
}

TEST_CASE("console: levels filter messages, a bar on a terminal, periodic lines otherwise") {
  const auto at = [](int64_t epoch, int64_t step, int64_t steps, double loss) {
    StepFigures f;
    f.epoch = epoch, f.epochs = 3, f.step = step, f.steps = steps, f.loss = loss;
    return f;
  };
  std::ostringstream lines_out;
  Console lines(lines_out, LogLevel::normal, ProgressMode::automatic, /*terminal=*/false);
  CHECK_FALSE(lines.draws_bar());
  for (int64_t step = 1; step <= 5; ++step) lines.progress(at(1, step, 5, 0.5), /*line_due=*/step % 2 == 0);
  lines.detail("hidden at normal level");
  lines.info("epoch 1 done");
  CHECK(lines_out.str() ==
        "epoch 1/3 step 2/5  loss 0.5000\nepoch 1/3 step 4/5  loss 0.5000\nepoch 1/3 step 5/5  loss 0.5000\nepoch 1 done\n");

  std::ostringstream bar_out;
  Console bar(bar_out, LogLevel::verbose, ProgressMode::automatic, /*terminal=*/true, /*colour=*/false, /*width=*/100);
  CHECK(bar.draws_bar());
  bar.progress(at(2, 1, 4, 0.25), false);
  bar.progress(at(2, 2, 4, 0.25), false);  // within 0.2 s of the last draw: not redrawn
  bar.detail("a detail");                  // ends the bar's line first
  bar.progress(at(2, 4, 4, 0.25), false);  // the last step is always drawn
  const std::string b = bar_out.str();
  CHECK(b.find("\r\033[2Kepoch 2/3 [#######.......................] 1/4  loss 0.2500\na detail\n") == 0);
  CHECK(b.find("2/4") == std::string::npos);
  CHECK(b.find("[##############################] 4/4  loss 0.2500\n") != std::string::npos);

  std::ostringstream validating;
  Console shown(validating, LogLevel::normal, ProgressMode::bar, false, false, 60);
  shown.validation_progress(1, 40);
  shown.validation_progress(40, 40);  // the last batch clears the bar for the epoch line
  CHECK(validating.str() == "\r\033[2Kvalidate [....................] 1/40\r\033[2Kvalidate [####################] 40/40\r\033[2K");
  std::ostringstream not_shown;
  Console plain(not_shown, LogLevel::normal, ProgressMode::lines, false);
  plain.validation_progress(1, 40);  // only a terminal's bar shows validation
  CHECK(not_shown.str().empty());

  std::ostringstream quiet_out;
  Console quiet(quiet_out, LogLevel::quiet, ProgressMode::bar, false);
  quiet.progress(StepFigures{.epoch = 1, .epochs = 1, .step = 1, .steps = 1}, true);
  quiet.info("not shown");
  quiet.warn("3 steps skipped (inf/nan gradients)");
  quiet.summary("top-1 0.76");
  CHECK(quiet_out.str() == "warning: 3 steps skipped (inf/nan gradients)\ntop-1 0.76\n");
  CHECK(parse_log_level("verbose") == LogLevel::verbose);
  CHECK(parse_progress_mode("auto") == ProgressMode::automatic);
  CHECK_THROWS_WITH_AS(parse_log_level("loud"), doctest::Contains("unknown log level 'loud'"), Error);
}
