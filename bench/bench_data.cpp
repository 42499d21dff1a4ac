// bench_data: images per second of the data pipeline, in total and per worker, for 1, 2, ...
// workers: JPEG decoding alone; decoding + RandomResizedCrop(224) + flip + normalise (the ImageNet
// training pipeline) from JPEG files; the same from a packed HDF5 file (256x256 pixels); and
// Fashion-MNIST (IDX) batches. The JPEGs are generated and encoded here at 500x375, the typical
// ImageNet size. Prints a table and writes JSON.
//
//   bench_data [--images 256] [--max-workers N] [--seconds 1.5] [--json out.json]
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>

#include "data/decode.h"
#include "data/encode.h"
#include "data/file_dataset.h"
#include "data/idx.h"
#include "data/loader.h"
#include "data/packed_dataset.h"

using namespace cnn;
using namespace cnn::data;
using Clock = std::chrono::steady_clock;

namespace {
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

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
}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"bench_data: data pipeline throughput per worker count"};
  int images = 256;
  int max_workers = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  double seconds = 1.5;
  std::string json_path, fashion = "/usr/share/datasets/fashion-mnist";
  app.add_option("--images", images, "number of generated 500x375 JPEGs")->check(CLI::PositiveNumber);
  app.add_option("--max-workers", max_workers, "largest worker count measured")->check(CLI::PositiveNumber);
  app.add_option("--seconds", seconds, "measuring time per entry")->check(CLI::PositiveNumber);
  app.add_option("--json", json_path, "also write the results here");
  app.add_option("--fashion-mnist", fashion, "folder of the Fashion-MNIST IDX files");
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

    const Pipeline train = Pipeline::train(224);
    const Pipeline mnist({}, 28, 28, 1, Normalize{{0.2860f}, {0.3530f}});
    nlohmann::json results = nlohmann::json::array();
    std::printf("%-8s %14s %14s %14s %14s   (images/s total; per worker in brackets)\n", "workers", "jpeg_decode",
                "jpeg_rrc224", "packed_rrc224", "idx_fmnist");
    for (int workers = 1; workers <= max_workers; workers = workers < 4 ? workers + 1 : workers * 2) {
      nlohmann::json row = {{"workers", workers}};
      row["jpeg_decode"] = decode_rate(jpegs, workers, seconds);
      row["jpeg_rrc224_flip_normalize"] = loader_rate(folder, train, workers, 64, seconds);
      row["packed_rrc224_flip_normalize"] = loader_rate(packed, train, workers, 64, seconds);
      if (idx) row["idx_fashion_mnist"] = loader_rate(idx, mnist, workers, 256, seconds);
      auto cell = [&](const char* key) {
        if (!row.contains(key)) return std::string("-");
        const double v = row[key];
        char text[64];
        std::snprintf(text, sizeof text, "%.0f (%.0f)", v, v / workers);
        return std::string(text);
      };
      std::printf("%-8d %14s %14s %14s %14s\n", workers, cell("jpeg_decode").c_str(),
                  cell("jpeg_rrc224_flip_normalize").c_str(), cell("packed_rrc224_flip_normalize").c_str(),
                  cell("idx_fashion_mnist").c_str());
      std::fflush(stdout);
      results.push_back(row);
    }
    const nlohmann::json doc = {{"benchmark", "bench_data"},
                                {"image_size", {375, 500}},
                                {"images", images},
                                {"hardware_threads", std::thread::hardware_concurrency()},
                                {"results", results}};
    if (!json_path.empty()) std::ofstream(json_path) << doc.dump(2) << "\n";
    std::printf("%s\n", doc.dump().c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_data: %s\n", e.what());
    return 1;
  }
}
