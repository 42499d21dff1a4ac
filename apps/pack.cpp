// cnn_pack: converts a dataset (ImageFolder, list file, IDX, CIFAR) into one HDF5 file the loader
// reads directly: pre-resized uint8 images (or the original encoded bytes), labels and class names.
// With --check it only scans a dataset and lists the files that cannot be decoded.
//
//   cnn_pack train/ train_256.h5 --size 256 --workers 8
//   cnn_pack train.csv train.h5 --encoded
//   cnn_pack cifar10:/data/cifar-10-batches-bin:train cifar_train.h5
//   cnn_pack --check train/
#include <CLI/CLI.hpp>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <thread>

#include "cli_checks.h"
#include "data/open_dataset.h"
#include "data/packed_dataset.h"

using namespace cnn;

namespace {
// Ctrl-C or SIGTERM: the packing stops at the next sample and removes its temporary file (a second
// signal ends the process at once, as without the handler).
volatile std::sig_atomic_t g_stop = 0;
extern "C" void on_stop_signal(int signal) {
  if (g_stop) {
    std::signal(signal, SIG_DFL);
    std::raise(signal);
  }
  g_stop = 1;
}
}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"cnn_pack: packs a dataset into one HDF5 file for fast random access"};
  std::string source, output;
  bool check_only = false;
  cnn::data::PackOptions options;
  options.workers = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  app.add_option("source", source,
                 "dataset: a folder (ImageFolder), a .csv/.txt list file, mnist:DIR[:train|test], "
                 "fashion-mnist:DIR[:train|test], idx:IMAGES,LABELS, cifar10:DIR[:train|test], cifar100:DIR[:train|test]")
      ->required();
  app.add_option("output", output, "the HDF5 file to write (not with --check)");
  app.add_flag("--check", check_only, "only scan the dataset and list unreadable files; write nothing");
  app.add_option("--size", options.size, "side of the stored square images (shorter side resized, then centre-cropped); "
                                         "0 keeps the native size (IDX, CIFAR)")
      ->check(cnn::apps::at_least(0));
  app.add_flag("--encoded", options.encoded, "store the original file bytes instead of decoded pixels");
  app.add_option("--channels", options.channels, "1 (gray) or 3 (RGB)")->check(CLI::IsMember({1, 3}));
  app.add_option("--workers", options.workers, "decoding threads")->check(cnn::apps::at_least(1));
  app.add_option("--max-image-pixels", options.max_image_pixels,
                 "an image whose header claims more pixels (width x height) is skipped as unreadable before it is decoded "
                 "(decompression bombs; cnn_train's [data] max_image_pixels); 0: no limit")
      ->check(cnn::apps::at_least(0))
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  try {
    const auto started = std::chrono::steady_clock::now();
    // From the start, when packing: a Ctrl-C while a large dataset is opened stops the pack at its
    // first batch (--check keeps the default: it writes nothing, so it just ends).
    if (!check_only) {
      std::signal(SIGINT, on_stop_signal);
      std::signal(SIGTERM, on_stop_signal);
    }
    const cnn::data::DatasetPtr dataset = cnn::data::open_dataset(source);
    if (check_only) {
      const auto bad = cnn::data::check_dataset(*dataset, options.workers, options.max_image_pixels);
      for (const auto& [file, reason] : bad) std::printf("%s\t%s\n", file.c_str(), reason.c_str());
      std::fprintf(stderr, "cnn_pack: checked %lld samples, %zu unreadable\n", static_cast<long long>(dataset->size()),
                   bad.size());
      return bad.empty() ? 0 : 1;
    }
    if (output.empty()) {
      std::fprintf(stderr, "cnn_pack: give the output file (or --check to only scan)\n");
      return 2;
    }
    options.stop_requested = [] { return g_stop != 0; };
    const auto report = cnn::data::pack_dataset(*dataset, output, options);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    std::fprintf(stderr, "cnn_pack: wrote %lld images (%zu unreadable, skipped) to %s in %.1f s\n",
                 static_cast<long long>(report.written), report.skipped.size(), output.c_str(), seconds);
    for (const auto& file : report.skipped) std::fprintf(stderr, "  skipped %s\n", file.c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cnn_pack: %s\n", e.what());
    return 1;
  }
}
