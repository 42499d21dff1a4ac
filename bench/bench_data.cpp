// bench_data: images per second of the data pipeline, in total and per worker, for 1, 2, ...
// workers: JPEG decoding alone; decoding + RandomResizedCrop(224) + flip + normalise (the ImageNet
// training pipeline) from JPEG files; the same from a packed HDF5 file (256x256 pixels); and
// Fashion-MNIST (IDX) batches. The JPEGs are generated and encoded here at 500x375, the typical
// ImageNet size. First, on one thread, the time per image of RandomResizedCrop(224) + flip +
// normalise alone, with the flip as a transform of its own and fused into the crop's resampling,
// checking that both give the same bits. When a Python with torch and
// torchvision is at hand ($CNN_PYTHON, default python3), the JPEG recipe also runs through
// torchvision's DataLoader with as many worker processes (bench/torchvision_loader.py, on the same
// files), and the table shows its rate and ours relative to it; otherwise it says why not. Prints
// tables and writes JSON.
//
//   bench_data [--images 256] [--max-workers N] [--seconds 1.5] [--json out.json] [--no-torchvision]
//              [--torchvision-script bench/torchvision_loader.py]
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include <sys/wait.h>
#include <time.h>

#include "data/decode.h"
#include "data/encode.h"
#include "data/file_dataset.h"
#include "data/idx.h"
#include "data/loader.h"
#include "data/packed_dataset.h"
#include "data/resample.h"
#include "data/transforms.h"
#include "kernels/augment.h"
#include "python_server.h"

using namespace cnn;
using namespace cnn::data;
using Clock = std::chrono::steady_clock;
using cnn::bench::python_interpreter;

namespace {
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// CPU time of the calling thread: the one-thread timings below are not charged for other work on
// a shared machine.
double thread_seconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

struct TransformTiming {
  double separate_us = 0, fused_us = 0;  // per image, median over the rounds
  bool identical = true;
};

// RandomResizedCrop(224) then RandomHorizontalFlip then normalise into `dtype` on one thread, per
// image, against RandomResizedCrop with the flip fused into its resampling (what the trainer and
// Pipeline::train run): alternating in `rounds` rounds over all `images`; the outputs of the first
// round must be equal bit for bit.
TransformTiming time_transforms(const std::vector<Image>& images, DType dtype, int rounds) {
  const Pipeline train = Pipeline::train(224);
  const RandomResizedCrop crop(224, 224), crop_and_flip(224, 224, {0.08, 1.0}, {3.0 / 4.0, 4.0 / 3.0}, 0.5);
  const RandomHorizontalFlip flip(0.5);
  const size_t slot_bytes = 224 * 224 * 3 * static_cast<size_t>(dtype_size(dtype));
  std::vector<uint8_t> separate(slot_bytes * images.size()), fused(slot_bytes * images.size());
  std::vector<double> separate_times, fused_times;
  TransformTiming timing;
  for (int round = 0; round < rounds; ++round) {
    const auto epoch = static_cast<uint64_t>(round);
    double start = thread_seconds();
    for (size_t i = 0; i < images.size(); ++i) {
      SampleRng rng(1, epoch, i);
      write_sample(flip.apply(crop.apply(images[i], rng), rng), train.normalize(), dtype, separate.data() + i * slot_bytes);
    }
    separate_times.push_back(thread_seconds() - start);
    start = thread_seconds();
    for (size_t i = 0; i < images.size(); ++i) {
      SampleRng rng(1, epoch, i);
      write_sample(crop_and_flip.apply(images[i], rng), train.normalize(), dtype, fused.data() + i * slot_bytes);
    }
    fused_times.push_back(thread_seconds() - start);
    if (round == 0) timing.identical = separate == fused;
  }
  auto median_us = [&](std::vector<double> t) {
    std::sort(t.begin(), t.end());
    return 1e6 * t[t.size() / 2] / static_cast<double>(images.size());
  };
  timing.separate_us = median_us(separate_times);
  timing.fused_us = median_us(fused_times);
  return timing;
}

// A photo-like test image: smooth colour fields plus fine texture (so JPEG has detail to code).
Image synthetic_photo(int h, int w, int seed) {
  Image img(h, w, 3);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      for (int c = 0; c < 3; ++c) {
        const double v = 128 + 70 * std::sin(0.013 * (x + 37 * seed) + 1.3 * c) * std::cos(0.017 * (y - 11 * seed)) +
                         25 * std::sin(0.9 * x + 0.7 * y + seed + c);
        img.at(y, x, c) = static_cast<uint8_t>(std::clamp(v, 0.0, 255.0));
      }
  return img;
}

// Decodes the in-memory JPEGs on `workers` threads for about `seconds`; images per second.
double decode_rate(const std::vector<std::vector<uint8_t>>& jpegs, int workers, double seconds) {
  std::atomic<int64_t> decoded{0};
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  const auto start = Clock::now();
  for (int w = 0; w < workers; ++w)
    threads.emplace_back([&, w] {
      for (size_t i = static_cast<size_t>(w); !stop; i = (i + 1) % jpegs.size()) {
        decode_image(jpegs[i].data(), jpegs[i].size(), {}, "bench");
        ++decoded;
      }
    });
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  stop = true;
  for (auto& t : threads) t.join();
  return static_cast<double>(decoded) / seconds_since(start);
}

// Pulls batches from a loader for about `seconds` (after one warm-up batch); images per second.
double loader_rate(DatasetPtr dataset, const Pipeline& pipeline, int workers, int64_t batch, double seconds) {
  LoaderOptions o;
  o.batch_size = batch;
  o.workers = workers;
  o.seed = 1;
  o.log = [](const std::string&) {};  // a benchmark always waits for data: no reports
  Loader loader(std::move(dataset), pipeline, o);
  int64_t images = 0, epoch = 0;
  loader.start_epoch(epoch);
  loader.next();
  const auto start = Clock::now();
  while (seconds_since(start) < seconds) {
    auto b = loader.next();
    if (!b) {
      loader.start_epoch(++epoch);
      continue;
    }
    images += b->size();
  }
  return static_cast<double>(images) / seconds_since(start);
}

// The outcome of one torchvision run: its JSON line (images_per_second and versions), or why
// there is none.
struct TorchvisionRun {
  nlohmann::json result;
  std::string skipped;
};

std::string shell_quoted(const std::string& text) {
  std::string quoted = "'";
  for (const char ch : text) quoted += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
  return quoted + "'";
}

// Runs `script` (bench/torchvision_loader.py) with $CNN_PYTHON, default python3, on the ImageFolder
// `root` with `workers` DataLoader workers for about `seconds`, and reads the last JSON line it
// prints (its other output, such as warnings, is ignored unless there is no such line).
TorchvisionRun run_torchvision(const std::filesystem::path& script, const std::filesystem::path& root, int workers,
                               double seconds) {
  TorchvisionRun run;
  if (!std::filesystem::exists(script)) {
    run.skipped = script.string() + " not found (give its place with --torchvision-script)";
    return run;
  }
  const std::string interpreter = python_interpreter();
  const std::string command = interpreter + " " + shell_quoted(script.string()) + " --root " +
                              shell_quoted(root.string()) + " --workers " + std::to_string(workers) +
                              " --batch 64 --seconds " + std::to_string(seconds) + " 2>&1";
  FILE* pipe = ::popen(command.c_str(), "r");
  if (!pipe) {
    run.skipped = "could not start " + interpreter;
    return run;
  }
  std::string output, last_json, last_line;
  char buffer[4096];
  while (std::fgets(buffer, sizeof buffer, pipe)) output += buffer;
  const int status = ::pclose(pipe);
  size_t begin = 0;
  while (begin < output.size()) {
    size_t end = output.find('\n', begin);
    if (end == std::string::npos) end = output.size();
    const std::string line = output.substr(begin, end - begin);
    if (!line.empty()) (line.front() == '{' ? last_json : last_line) = line;
    begin = end + 1;
  }
  if (!last_json.empty()) {
    run.result = nlohmann::json::parse(last_json, nullptr, false);
    if (run.result.is_object() && run.result.contains("skipped")) run.skipped = run.result["skipped"];
    else if (!run.result.is_object() || !run.result.contains("images_per_second")) run.skipped = "unreadable output: " + last_json;
    return run;
  }
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : status;
  run.skipped = interpreter + " exited with status " + std::to_string(code) +
                (last_line.empty() ? std::string() : ": " + last_line);
  return run;
}
}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"bench_data: data pipeline throughput per worker count"};
  int images = 256;
  int max_workers = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  double seconds = 1.5;
  std::string json_path, fashion = "/usr/share/datasets/fashion-mnist";
  // The bench/ folder of the source tree (CMake's CNN_BENCH_DIR): where torchvision_loader.py lives.
  std::string torchvision_script = (std::filesystem::path(CNN_BENCH_DIR) / "torchvision_loader.py").string();
  bool no_torchvision = false;
  app.add_option("--images", images, "number of generated 500x375 JPEGs")->check(CLI::PositiveNumber);
  app.add_option("--max-workers", max_workers, "largest worker count measured")->check(CLI::PositiveNumber);
  app.add_option("--seconds", seconds, "measuring time per entry")->check(CLI::PositiveNumber);
  app.add_option("--json", json_path, "also write the results here");
  app.add_option("--fashion-mnist", fashion, "folder of the Fashion-MNIST IDX files");
  app.add_option("--torchvision-script", torchvision_script, "the torchvision comparison script");
  app.add_flag("--no-torchvision", no_torchvision, "skip the comparison with torchvision's DataLoader");
  CLI11_PARSE(app, argc, argv);

  try {
    const auto dir = std::filesystem::temp_directory_path() / ("bench_data_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    struct Cleanup {
      std::filesystem::path p;
      ~Cleanup() {
        std::error_code ec;
        std::filesystem::remove_all(p, ec);
      }
    } cleanup{dir};
    std::vector<std::vector<uint8_t>> jpegs;
    size_t jpeg_bytes = 0;
    for (int i = 0; i < images; ++i) {
      jpegs.push_back(encode_image(synthetic_photo(375, 500, i), ImageFormat::jpeg, 90));
      jpeg_bytes += jpegs.back().size();
      const auto file = dir / "jpeg" / (i % 2 ? "b" : "a") / (std::to_string(i) + ".jpg");
      std::filesystem::create_directories(file.parent_path());
      std::ofstream(file, std::ios::binary)
          .write(reinterpret_cast<const char*>(jpegs.back().data()), static_cast<std::streamsize>(jpegs.back().size()));
    }
    std::fprintf(stderr, "bench_data: %d JPEGs of 500x375, %.0f KiB each on average\n", images,
                 jpeg_bytes / 1024.0 / images);
    const DatasetPtr folder = open_image_folder((dir / "jpeg").string());
    PackOptions pack;
    pack.size = 256;
    pack.workers = max_workers;
    pack.log = [](const std::string&) {};
    const std::string packed_path = (dir / "packed.h5").string();
    pack_dataset(*folder, packed_path, pack);
    const DatasetPtr packed = std::make_shared<PackedDataset>(packed_path);
    DatasetPtr idx;
    if (std::filesystem::exists(fashion + "/train-images-idx3-ubyte.gz") ||
        std::filesystem::exists(fashion + "/train-images-idx3-ubyte"))
      idx = open_mnist(fashion, true);

    std::vector<Image> decoded;
    for (size_t i = 0; i < std::min<size_t>(jpegs.size(), 32); ++i)
      decoded.push_back(decode_image(jpegs[i].data(), jpegs[i].size(), {}, "bench"));
    nlohmann::json transforms = nlohmann::json::array();
    bool identical = true;
    std::printf("RandomResizedCrop(224) + flip + normalise of a 500x375 image, one thread, microseconds per image\n");
    std::printf("%-6s %10s %12s %9s  %s\n", "dtype", "separate", "flip_fused", "speed-up", "same bits");
    for (const DType dtype : {DType::f32, DType::f16, DType::bf16}) {
      const TransformTiming t = time_transforms(decoded, dtype, 7);
      std::printf("%-6s %10.0f %12.0f %8.2fx  %s\n", dtype_name(dtype), t.separate_us, t.fused_us,
                  t.separate_us / t.fused_us, t.identical ? "yes" : "NO");
      std::fflush(stdout);
      transforms.push_back({{"dtype", dtype_name(dtype)},
                            {"separate_flip_us", t.separate_us},
                            {"flip_fused_us", t.fused_us},
                            {"identical", t.identical}});
      identical = identical && t.identical;
    }

    const Pipeline train = Pipeline::train(224);
    const Pipeline mnist({}, 28, 28, 1, Normalize{{0.2860f}, {0.3530f}});
    nlohmann::json results = nlohmann::json::array();
    // Versions of the torchvision runs, or why the comparison stopped (the first failure ends it).
    nlohmann::json torchvision = nlohmann::json::object();
    std::string torchvision_skipped = no_torchvision ? "--no-torchvision" : "";
    std::printf("%-8s %14s %14s %14s %14s %14s %7s   (images/s total; per worker in brackets; vs_tv: jpeg_rrc224 / "
                "tv_rrc224)\n",
                "workers", "jpeg_decode", "jpeg_rrc224", "packed_rrc224", "idx_fmnist", "tv_rrc224", "vs_tv");
    for (int workers = 1; workers <= max_workers; workers = workers < 4 ? workers + 1 : workers * 2) {
      nlohmann::json row = {{"workers", workers}};
      row["jpeg_decode"] = decode_rate(jpegs, workers, seconds);
      row["jpeg_rrc224_flip_normalize"] = loader_rate(folder, train, workers, 64, seconds);
      row["packed_rrc224_flip_normalize"] = loader_rate(packed, train, workers, 64, seconds);
      if (idx) row["idx_fashion_mnist"] = loader_rate(idx, mnist, workers, 256, seconds);
      if (torchvision_skipped.empty()) {
        const TorchvisionRun tv = run_torchvision(torchvision_script, dir / "jpeg", workers, seconds);
        if (tv.skipped.empty()) {
          const double rate = tv.result["images_per_second"];
          row["torchvision_jpeg_rrc224_flip_normalize"] = rate;
          row["jpeg_rrc224_vs_torchvision"] = row["jpeg_rrc224_flip_normalize"].get<double>() / rate;
          torchvision = tv.result;
          torchvision.erase("images_per_second");
          torchvision.erase("workers");
        } else {
          torchvision_skipped = tv.skipped;
          std::printf("(torchvision comparison skipped: %s)\n", tv.skipped.c_str());
        }
      }
      auto cell = [&](const char* key) {
        if (!row.contains(key)) return std::string("-");
        const double v = row[key];
        char text[64];
        std::snprintf(text, sizeof text, "%.0f (%.0f)", v, v / workers);
        return std::string(text);
      };
      std::string ratio = "-";
      if (row.contains("jpeg_rrc224_vs_torchvision")) {
        char text[32];
        std::snprintf(text, sizeof text, "%.2fx", row["jpeg_rrc224_vs_torchvision"].get<double>());
        ratio = text;
      }
      std::printf("%-8d %14s %14s %14s %14s %14s %7s\n", workers, cell("jpeg_decode").c_str(),
                  cell("jpeg_rrc224_flip_normalize").c_str(), cell("packed_rrc224_flip_normalize").c_str(),
                  cell("idx_fashion_mnist").c_str(), cell("torchvision_jpeg_rrc224_flip_normalize").c_str(),
                  ratio.c_str());
      std::fflush(stdout);
      results.push_back(row);
    }
    const nlohmann::json doc = {{"benchmark", "bench_data"},
                                {"image_size", {375, 500}},
                                {"images", images},
                                {"hardware_threads", std::thread::hardware_concurrency()},
                                {"transforms_one_thread", transforms},
                                {"torchvision", torchvision_skipped.empty()
                                                    ? torchvision
                                                    : nlohmann::json{{"skipped", torchvision_skipped}}},
                                {"results", results}};
    if (!json_path.empty()) std::ofstream(json_path) << doc.dump(2) << "\n";
    std::printf("%s\n", doc.dump().c_str());
    if (!identical) {
      std::fprintf(stderr, "bench_data: the fused crop and flip no longer reproduce the separate transforms bit for bit\n");
      return 1;
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_data: %s\n", e.what());
    return 1;
  }
}
